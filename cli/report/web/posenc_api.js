// window.posenc: posenc's own C++ (wasm/bind.cc, compiled by the wasm preset) as a JavaScript
// API, embedded by `posenc report` and `posenc playground` (cli/report/playground.h). Names are
// the Python module's in camelCase; each function returns {shape, data} with data a typed array
// (Float32Array, Float64Array or Int32Array, as the CLI's values), and throws an Error whose
// message is posenc's own (what the CLI prints after "posenc: error: ") on bad input.
// window.posencReady resolves to window.posenc once the module is instantiated, or rejects with
// the reason it cannot be (no WebAssembly in this browser, or no module in the page).
(function () {
  'use strict';

  function fail(r) {
    const e = new Error(r.message);
    e.kind = r.kind;  // "error", "config error", "I/O error" (the CLI's words)
    throw e;
  }
  function checked(r) { return r.ok ? r : fail(r); }
  function tensor(r) { return { shape: r.shape, data: r.data }; }
  function opt(o, key, fallback) { return o && o[key] !== undefined ? o[key] : fallback; }

  function makeApi(m) {
    return {
      version: m.version(),
      // [numPositions, dim] float32: PE(offset + r).
      sinusoidalTable(numPositions, dim, o) {
        return tensor(checked(m.sinusoidalTable(numPositions, dim, opt(o, 'base', 10000),
                                                opt(o, 'layout', 'interleaved'),
                                                opt(o, 'offset', 0))));
      },
      // [dim / 2] float64 radians per position of each column pair.
      sinusoidalInvFreq(dim, o) {
        return tensor(checked(m.sinusoidalInvFreq(dim, opt(o, 'base', 10000),
                                                  opt(o, 'layout', 'interleaved'))));
      },
      // A HF config.json (text): {shape, data: inv_freq (float64), attentionFactor, ropeType,
      // pairs: [{index, invFreq, defaultInvFreq, wavelength, ratioToDefault, region}], ...}.
      ropeInvFreq(configJson, o) {
        const r = checked(m.ropeInvFreq(String(configJson), opt(o, 'seqLen', 0),
                                        opt(o, 'layerType', ''), opt(o, 'numerics', 'hf')));
        const out = Object.assign({}, r);
        delete out.ok;
        return out;
      },
      // [2, N, rotaryDim] float32: cos then sin in HF's layout for the given positions (also
      // as the views cos and sin).
      ropeCosSin(positions, headDim, o) {
        const r = checked(m.ropeCosSin(Array.from(positions), headDim, opt(o, 'theta', 10000),
                                       opt(o, 'rotaryDim', 0), opt(o, 'pairing', 'half_split'),
                                       opt(o, 'numerics', 'accurate'),
                                       o && o.invFreq ? Array.from(o.invFreq) : null,
                                       opt(o, 'attentionFactor', 1)));
        const data = new Float32Array(2 * r.cos.length);
        data.set(r.cos, 0);
        data.set(r.sin, r.cos.length);
        return { shape: [2].concat(r.shape), data, cos: data.subarray(0, r.cos.length),
                 sin: data.subarray(r.cos.length) };
      },
      // [H] float64 slopes.
      alibiSlopes(numHeads, o) {
        return tensor(checked(m.alibiSlopes(numHeads, opt(o, 'maxBias', 8),
                                            opt(o, 'convention', 'reference'))));
      },
      // [H, L, L] float64 bias (causal: -Infinity for future keys).
      alibiBias(numHeads, length, o) {
        return tensor(checked(m.alibiBias(numHeads, length, opt(o, 'maxBias', 8),
                                          opt(o, 'form', 'causal'))));
      },
      // int32 bucket of each relative position (key - query).
      t5Bucket(relativePositions, o) {
        return tensor(checked(m.t5Bucket(Array.from(relativePositions), opt(o, 'numBuckets', 32),
                                         opt(o, 'maxDistance', 128),
                                         opt(o, 'bidirectional', true))));
      },
      // int32 [queryLen, keyLen]: query position minus key position.
      relativeMatrix(queryLen, keyLen, o) {
        return tensor(checked(m.relativeMatrix(queryLen, keyLen, opt(o, 'queryOffset', 0),
                                               opt(o, 'sign', 'query_minus_key'))));
      },
      // Reference attention (float64) of q, k, v {shape: [S, H, D], data} with a registered
      // scheme; o.args holds the scheme's arguments (numbers, text, tensors as {shape, data}).
      attention(q, k, v, o) {
        return tensor(checked(m.attention(q, k, v, opt(o, 'scheme', 'none'),
                                          opt(o, 'mask', 'causal'), opt(o, 'args', {}))));
      },
      // The permutation demonstration: {schemes: [{scheme, pooledDifference,
      // maxTokenDifference, orderAware}]}.
      permutationDemo(first, second, o) {
        const r = checked(m.permutationDemo(String(first), String(second),
                                            opt(o, 'startToken', '<s>'), opt(o, 'modelDim', 64),
                                            opt(o, 'heads', 4), opt(o, 'seed', 2026)));
        return { schemes: r.schemes };
      },
      schemes() { return m.schemes(); },
    };
  }

  function wasmBytes() {
    const el = document.getElementById('posenc-wasm');
    if (!el) return null;
    const text = atob(el.textContent.trim());
    const bytes = new Uint8Array(text.length);
    for (let i = 0; i < text.length; ++i) bytes[i] = text.charCodeAt(i);
    return bytes;
  }

  window.posencReady = (async function () {
    if (typeof WebAssembly !== 'object') {
      throw new Error('this browser runs no WebAssembly');
    }
    const bytes = wasmBytes();
    if (!bytes || typeof createPosencModule !== 'function') {
      throw new Error('this page carries no posenc module');
    }
    const m = await createPosencModule({ wasmBinary: bytes });
    window.posenc = makeApi(m);
    return window.posenc;
  })();
})();
