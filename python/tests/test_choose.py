"""posenc.choose: the same answer as `posenc choose --json` (one C++
implementation, posenc/choose.h), read from the committed evidence file, and
its errors."""
import json
import pathlib
import subprocess

import pytest

import posenc

from conftest import ROOT

CLI = ROOT / "build" / "release" / "cli" / "posenc"
EVIDENCE = ROOT / "docs" / "evidence" / "choose.json"


def test_default_evidence_is_the_committed_file():
    path = pathlib.Path(posenc._choose.default_evidence_path())
    assert path.resolve() == EVIDENCE.resolve()


@pytest.mark.skipif(not CLI.exists(), reason="needs the release CLI (build/release)")
@pytest.mark.parametrize("args,kwargs", [
    (["--train-length", "128", "--target-length", "512"],
     {"train_length": 128, "target_length": 512}),
    (["--train-length", "128", "--target-length", "2048", "--finetune", "short", "--engine",
      "vllm", "--engine", "llama.cpp"],
     {"train_length": 128, "target_length": 2048, "finetune": "short",
      "engines": ["vllm", "llama.cpp"]}),
    (["--architecture", "vision", "--train-length", "256", "--target-length", "1024"],
     {"architecture": "vision", "train_length": 256, "target_length": 1024}),
])
def test_same_dict_as_the_cli(args, kwargs):
    cli = subprocess.run([str(CLI), "choose", "--json", *args], capture_output=True, text=True,
                         check=True)
    assert posenc.choose(**kwargs) == json.loads(cli.stdout)


def test_from_a_config_gives_a_loadable_change():
    cfg = ROOT / "examples" / "configs" / "llama-3.1-8b.json"
    a = posenc.choose(from_path=str(cfg), target_length=4 * 131072, finetune="full")
    assert a["constraints"]["train_length"] == 8192
    yarn = next(c for c in a["candidates"] if c["scheme"] == "rope+yarn")
    patch = yarn["config"]["merge_patch"]
    assert patch["rope_scaling"]["rope_type"] == "yarn"
    assert patch["rope_scaling"]["factor"] == 64.0
    # The changed config through posenc's own loader (Python side).
    config = json.loads(cfg.read_text())
    config["rope_scaling"] = {k: v for k, v in patch["rope_scaling"].items() if v is not None}
    config["max_position_embeddings"] = patch["max_position_embeddings"]
    info = posenc.rope_config(config, 0)
    assert info["rope_type"] == "yarn"
    assert yarn["config"]["checked"]["attention_factor"] == pytest.approx(
        info["attention_factor"], rel=1e-12)


def test_ranking_follows_the_evidence_file(tmp_path):
    evidence = json.loads(EVIDENCE.read_text())
    for run in evidence["runs"]:
        if "sinusoidal" in run["rows"]:
            for v in run["rows"]["sinusoidal"]["eval"].values():
                v["bits_per_byte"] = 0.5
    path = tmp_path / "evidence.json"
    path.write_text(json.dumps(evidence))
    a = posenc.choose(train_length=128, target_length=512, evidence=str(path))
    assert a["candidates"][0]["scheme"] == "sinusoidal"
    assert a["candidates"][0]["verdict"] == "recommended"
    assert posenc.choose(train_length=128, target_length=512)["candidates"][0]["scheme"] != \
        "sinusoidal"


@pytest.mark.parametrize("kwargs,error,text", [
    ({"architecture": "rnn"}, ValueError, "architecture: got 'rnn'"),
    ({"engines": ["tgi"]}, ValueError, "engines: got 'tgi'"),
    ({"finetune": "a lot"}, ValueError, "finetune: got 'a lot'"),
    ({"train_length": 0}, ValueError, "train_length: got 0"),
    ({"target_length": -3}, ValueError, "target_length: got -3"),
    ({"from_path": "/nonexistent/config.json"}, posenc.IoError, "/nonexistent/config.json"),
    ({"evidence": "/nonexistent/evidence.json"}, posenc.IoError, "/nonexistent/evidence.json"),
])
def test_errors(kwargs, error, text):
    with pytest.raises(error, match=text.replace("(", r"\(")):
        posenc.choose(**kwargs)


def test_invalid_config_is_a_config_error(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text(json.dumps({"hidden_size": 64, "num_attention_heads": 2,
                               "rope_scaling": {"rope_type": "yarn", "factor": "8"}}))
    with pytest.raises(posenc.ConfigError, match="rope_scaling.factor"):
        posenc.choose(from_path=str(bad))
