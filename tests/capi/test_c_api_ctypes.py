"""The C API (include/posenc/c.h) driven from Python ctypes, for the error
paths a foreign-language caller meets: status codes, posenc_last_error()
messages naming the argument, the value and what is allowed, NULL pointers,
out-of-range enums, malformed files, the thread-local error, and a good call
in between (so a stale message is not mistaken for a new one).

Run by ctest (tests/CMakeLists.txt) with POSENC_C_LIBRARY = the built
libposenc.so."""
import ctypes
import os
import pathlib
import threading

ROOT = pathlib.Path(__file__).resolve().parents[2]
lib = ctypes.CDLL(os.environ["POSENC_C_LIBRARY"])
ref = ctypes.byref

OK, INVALID, CONFIG, IO = 0, 1, 2, 3
MAX_RANK = 6


SIZE = ("struct_size", ctypes.c_size_t)  # every public struct starts with its size (c.h)


class Tensor(ctypes.Structure):
    _fields_ = [SIZE, ("data", ctypes.c_void_p), ("dtype", ctypes.c_int), ("rank", ctypes.c_int32),
                ("shape", ctypes.c_int64 * MAX_RANK), ("strides", ctypes.c_int64 * MAX_RANK)]


class Positions(ctypes.Structure):
    _fields_ = [SIZE, ("ids", ctypes.POINTER(ctypes.c_int64)), ("count", ctypes.c_int64),
                ("offset", ctypes.c_int64)]


class RopeParams(ctypes.Structure):
    _fields_ = [SIZE, ("head_dim", ctypes.c_int64), ("rotary_dim", ctypes.c_int64),
                ("theta", ctypes.c_double), ("pairing", ctypes.c_int), ("numerics", ctypes.c_int),
                ("inv_freq", ctypes.POINTER(ctypes.c_double)), ("inv_freq_count", ctypes.c_int64),
                ("attention_factor", ctypes.c_double)]


class ModelRope(ctypes.Structure):
    _fields_ = [SIZE, ("rope_type", ctypes.c_char * 32), ("model_type", ctypes.c_char * 64),
                ("format", ctypes.c_char * 16),
                ("is_alibi", ctypes.c_int32), ("alibi_heads", ctypes.c_int64),
                ("alibi_max_bias", ctypes.c_double), ("num_heads", ctypes.c_int64),
                ("num_kv_heads", ctypes.c_int64), ("head_dim", ctypes.c_int64),
                ("softmax_scale", ctypes.c_double), ("max_position_embeddings", ctypes.c_int64),
                ("original_max_position_embeddings", ctypes.c_int64),
                ("num_mrope_sections", ctypes.c_int32), ("mrope_section", ctypes.c_int64 * 4),
                ("mrope_interleaved", ctypes.c_int32), ("num_layer_types", ctypes.c_int32),
                ("layer_types", (ctypes.c_char * 32) * 8), ("num_warnings", ctypes.c_int32),
                ("warnings", ctypes.c_char * 2048), ("params", RopeParams)]


class SchemeArg(ctypes.Structure):
    _fields_ = [SIZE, ("name", ctypes.c_char_p), ("kind", ctypes.c_int),
                ("number", ctypes.c_double), ("text", ctypes.c_char_p), ("tensor", Tensor)]


class Scheme(ctypes.Structure):
    _fields_ = [SIZE, ("kind", ctypes.c_int), ("rope", ctypes.POINTER(RopeParams)),
                ("rope_keys", ctypes.c_int), ("alibi_slopes", ctypes.POINTER(ctypes.c_double)),
                ("num_alibi_slopes", ctypes.c_int64), ("t5_table", ctypes.POINTER(Tensor)),
                ("t5_max_distance", ctypes.c_int64), ("t5_direction", ctypes.c_int),
                ("name", ctypes.c_char_p), ("args", ctypes.POINTER(SchemeArg)),
                ("num_args", ctypes.c_int64)]


class AttentionParams(ctypes.Structure):
    _fields_ = [SIZE, ("layout", ctypes.c_int), ("mask", ctypes.c_int),
                ("sliding_window", ctypes.c_int64),
                ("scale", ctypes.c_double), ("scheme", ctypes.POINTER(Scheme)),
                ("query_tile", ctypes.c_int64), ("key_tile", ctypes.c_int64),
                ("query_positions", ctypes.POINTER(Positions)),
                ("key_positions", ctypes.POINTER(Positions)), ("precision", ctypes.c_int32)]


lib.posenc_last_error.restype = ctypes.c_char_p
lib.posenc_status_name.restype = ctypes.c_char_p
lib.posenc_version.restype = ctypes.c_char_p
lib.posenc_version_number.restype = ctypes.c_int32
lib.posenc_positions_offset.argtypes = [ctypes.c_int64, ctypes.POINTER(Positions)]
# Prototypes of the calls with int64_t parameters: without them ctypes passes a
# Python int as a 32-bit C int, and an int64_t passed on the stack (the 7th
# argument of posenc_rope_from_config) gets whatever the upper 4 bytes of its
# slot held (this test failed now and then: "inv_freq: got NULL" with capacity 0).
lib.posenc_rope_from_config.argtypes = [ctypes.c_char_p, ctypes.c_int64, ctypes.c_char_p,
                                        ctypes.c_int, ctypes.POINTER(ModelRope),
                                        ctypes.POINTER(ctypes.c_double), ctypes.c_int64]
lib.posenc_alibi_slopes.argtypes = [ctypes.c_int64, ctypes.c_double, ctypes.c_int,
                                    ctypes.POINTER(ctypes.c_double), ctypes.c_int64]


def last_error():
    return lib.posenc_last_error().decode()


def tensor(buf, shape, dtype=0):
    t = Tensor()
    shape_arr = (ctypes.c_int64 * len(shape))(*shape)
    assert lib.posenc_tensor_contiguous(ctypes.cast(buf, ctypes.c_void_p), dtype, len(shape),
                                        shape_arr, ref(t)) == OK
    return t


def offset(value):
    pos = Positions()
    assert lib.posenc_positions_offset(value, ref(pos)) == OK, last_error()
    return pos


def rope(p, x, layout=0, pos=None):
    pos = pos or offset(0)
    return lib.posenc_rope_apply(None, p, x, layout, ref(pos), 0, None)


def attend(p, q, out):
    return lib.posenc_flash_attention(None, ref(p), ref(q), ref(q), ref(q), ref(out))


def expect(status, want, *needles):
    assert status == want, (status, last_error())
    for n in needles:
        assert n in last_error(), last_error()


def test_version_matches_the_version_file():
    version = (ROOT / "VERSION").read_text().strip()
    assert lib.posenc_version().decode() == version
    major, minor, patch = (int(x) for x in version.split("."))
    assert lib.posenc_version_number() == major * 10000 + minor * 100 + patch
    assert lib.posenc_status_name(IO) == b"io"


def test_struct_sizes_are_checked_and_last_error_clears_on_success():
    x = (ctypes.c_float * 16)()
    xt = tensor(x, [1, 2, 1, 8])
    assert xt.struct_size == ctypes.sizeof(Tensor)
    p = RopeParams()
    lib.posenc_rope_params_init(ref(p))
    assert p.struct_size == ctypes.sizeof(RopeParams)
    p.head_dim = 8
    # The pairing has no default: a wrong guess gives plausible wrong outputs.
    expect(rope(ref(p), ref(xt)), INVALID, "params.pairing: got -1", "must be set")
    p.pairing = 0
    assert rope(ref(p), ref(xt)) == OK and last_error() == ""
    raw = RopeParams(head_dim=8, theta=10000.0, attention_factor=1.0)  # no _init: size 0
    expect(rope(ref(raw), ref(xt)), INVALID, "params.struct_size: got 0",
           f"expected {ctypes.sizeof(RopeParams)}", "posenc_rope_params_init")
    bare = Tensor(data=ctypes.cast(x, ctypes.c_void_p), rank=4)
    expect(rope(ref(p), ref(bare)), INVALID, "x.struct_size: got 0")
    expect(rope(ref(p), ref(xt), 0, Positions()), INVALID, "positions.struct_size: got 0")
    expect(lib.posenc_positions_offset(-3, ref(Positions())), INVALID, "offset: got -3")
    m = ModelRope()
    gguf = ROOT / "tests" / "golden" / "gguf"
    path = str(gguf / "e_phi2_partial_rotary.gguf").encode()
    expect(lib.posenc_rope_from_config(path, 0, None, 1, ref(m), None, 0),
           INVALID, "out.struct_size: got 0", "posenc_model_rope_init")


def test_rope_errors_name_argument_value_and_allowed():
    x = (ctypes.c_float * 16)()
    xt = tensor(x, [1, 2, 1, 8])
    p = RopeParams()
    lib.posenc_rope_params_init(ref(p))
    p.head_dim, p.pairing = 8, 0
    assert rope(ref(p), ref(xt)) == OK
    p.rotary_dim = 3
    expect(rope(ref(p), ref(xt)),
           INVALID, "rotary_dim: got 3, expected")
    p.rotary_dim = 0
    expect(rope(ref(p), ref(xt), 5),
           INVALID, "layout: got 5", "POSENC_LAYOUT_BSHD (0) or POSENC_LAYOUT_BHSD (1)")
    expect(rope(ref(p), None),
           INVALID, "x: got NULL, expected a posenc_tensor")
    expect(rope(None, ref(xt)),
           INVALID, "params: got NULL")
    big = offset(1 << 24)
    expect(rope(ref(p), ref(xt), 0, big),
           INVALID, "positions")
    bad = tensor(x, [1, 2, 1, 8])
    bad.dtype = 7
    expect(rope(ref(p), ref(bad)),
           INVALID, "x.dtype: got 7", "POSENC_FLOAT32 (0)")
    bad.dtype, bad.rank = 0, 9
    expect(rope(ref(p), ref(bad)),
           INVALID, "x.rank: got 9, expected a rank in [1, 6]")


def test_config_errors_are_io_and_config_statuses():
    m = ModelRope()
    lib.posenc_model_rope_init(ref(m))
    gguf = ROOT / "tests" / "golden" / "gguf"
    expect(lib.posenc_rope_from_config(str(gguf / "h_nkv_2pow40.gguf").encode(), 0, None, 1,
                                       ref(m), None, 0),
           IO, "h_nkv_2pow40.gguf", "header.n_kv: got 1099511627776")
    expect(lib.posenc_rope_from_config(b"/nonexistent/config.json", 0, None, 1, ref(m), None, 0),
           IO, "/nonexistent/config.json")
    bad_json = pathlib.Path(os.environ.get("TMPDIR", "/tmp")) / f"posenc_capi_{os.getpid()}.json"
    bad_json.write_text('{"hidden_size": 64, "num_attention_heads": 4, '
                        '"rope_scaling": {"type": "linear"}}')
    try:
        expect(lib.posenc_rope_from_config(str(bad_json).encode(), 0, None, 1, ref(m), None, 0),
               CONFIG, "rope_scaling.factor: got nothing (missing)")
        # Text that is not JSON is an I/O error, as in C++, Python and the CLI (exit 4).
        bad_json.write_text('{"hidden_size": 64, "num_attention_heads": ')
        expect(lib.posenc_rope_from_config(str(bad_json).encode(), 0, None, 1, ref(m), None, 0),
               IO, "not valid JSON")
        bad_json.write_text("")
        expect(lib.posenc_rope_from_config(str(bad_json).encode(), 0, None, 1, ref(m), None, 0),
               IO, "the file is empty (0 bytes)")
        empty_gguf = bad_json.with_suffix(".gguf")
        empty_gguf.write_text("")
        expect(lib.posenc_rope_from_config(str(empty_gguf).encode(), 0, None, 1, ref(m), None, 0),
               IO, "the file is empty (0 bytes)")
        empty_gguf.write_text("{}")
        expect(lib.posenc_rope_from_config(str(empty_gguf).encode(), 0, None, 1, ref(m), None, 0),
               IO, "not a GGUF file")
        empty_gguf.unlink()
        expect(lib.posenc_rope_from_config(str(gguf).encode(), 0, None, 1, ref(m), None, 0),
               IO, "is a directory")
    finally:
        bad_json.unlink()
    # A wrong layer type lists the real ones, never "".
    llama = str(gguf / "b_llama31_8b_llama3_rope_freqs.gguf").encode()
    expect(lib.posenc_rope_from_config(llama, 0, b"sliding", 1, ref(m), None, 0),
           INVALID, "layer_type: got sliding", "none (the model has one rope for every layer")
    assert '""' not in last_error()
    ok = lib.posenc_rope_from_config(str(gguf / "e_phi2_partial_rotary.gguf").encode(), 0, None, 1,
                                     ref(m), None, 0)
    assert ok == OK and m.params.inv_freq_count == 16 and m.params.head_dim == 80
    buf = (ctypes.c_double * 4)()
    phi2 = str(gguf / "e_phi2_partial_rotary.gguf").encode()
    expect(lib.posenc_rope_from_config(phi2, 0, None, 1,
                                       ref(m), buf, 4),
           INVALID, "capacity: got 4, expected at least rotary_dim/2 = 16")
    expect(lib.posenc_rope_from_config(None, 0, None, 1, ref(m), None, 0),
           INVALID, "path: got NULL")


def test_attention_scheme_argument_errors():
    q = (ctypes.c_float * 16)()
    qt = tensor(q, [1, 2, 2, 4])
    ot = tensor((ctypes.c_float * 16)(), [1, 2, 2, 4])
    p = AttentionParams()
    lib.posenc_attention_params_init(ref(p))
    assert attend(p, qt, ot) == OK
    s = Scheme()
    lib.posenc_scheme_init(ref(s))
    args = (SchemeArg * 2)()
    for a in args:
        lib.posenc_scheme_arg_init(ref(a))
    args[0].name, args[0].kind, args[0].text = b"pairing", 1, b"diagonal"
    args[1].name, args[1].kind, args[1].text = b"rope_keys", 1, b"rotate"
    s.kind, s.name, s.args, s.num_args = 4, b"rope", args, 2
    p.scheme = ctypes.pointer(s)
    expect(attend(p, qt, ot),
           INVALID, "pairing: got diagonal", "half_split")
    args[0].kind = 0  # a number where a text is expected
    expect(attend(p, qt, ot),
           INVALID, "pairing.kind: got 0", "POSENC_ARG_TEXT (1)")
    s.name, s.num_args = b"deberta", 0
    expect(attend(p, qt, ot),
           INVALID, "deberta")
    s.kind = 9
    expect(attend(p, qt, ot), INVALID, "scheme.kind: got 9")
    # A typed RoPE scheme needs rope_keys: -1 after posenc_scheme_init.
    rp = RopeParams()
    lib.posenc_rope_params_init(ref(rp))
    rp.head_dim, rp.pairing = 4, 1
    s.kind, s.rope = 1, ctypes.pointer(rp)
    expect(attend(p, qt, ot), INVALID, "rope_keys: got -1")
    s.rope_keys = 0
    assert attend(p, qt, ot) == OK, last_error()
    p.scheme, p.sliding_window = None, -2
    expect(attend(p, qt, ot),
           INVALID, "sliding_window: got -2")


def test_last_error_is_per_thread_and_context_errors():
    ctx = ctypes.c_void_p()
    expect(lib.posenc_context_create(2000, 0, ref(ctx)), INVALID, "2000")
    assert ctx.value is None
    seen = []
    t = threading.Thread(target=lambda: seen.append(last_error()))
    t.start()
    t.join()
    assert seen == [""]
    assert "2000" in last_error()
    assert lib.posenc_context_create(2, 1, ref(ctx)) == OK and ctx.value
    slopes = (ctypes.c_double * 4)()
    assert lib.posenc_alibi_slopes(4, ctypes.c_double(8.0), 0, slopes, 4) == OK
    assert list(slopes) == [0.25, 0.0625, 0.015625, 0.00390625]
    expect(lib.posenc_alibi_slopes(4, ctypes.c_double(-1.0), 0, slopes, 4), INVALID,
           "max_bias: got -1")
    lib.posenc_context_destroy(ctx)
