// posenc/context.h: the explicit execution context passed down to kernels.
//
// Following gemma.cpp's ThreadingContext, a Context is created by the caller
// and passed to every public function that runs a kernel, rather than being a
// process-wide singleton: two Contexts can run concurrently. It holds
//  - the backend: kScalar (the reference kernels, plain loops, float64 angle
//    maths), kSimd (Highway kernels, runtime-dispatched to the best compiled
//    target), or kAuto (kSimd where a fast path exists, else kScalar);
//  - its workers: num_threads threads (the calling thread is worker 0),
//    either posenc's own pool (Workers::kPool, the default) or the calling
//    thread's OpenMP team (Workers::kOpenMP).
// Work is split into coarse tasks (batch*head x position tiles), never into
// elements; ParallelFor hands tasks out dynamically.
//
// Workers::kOpenMP is for callers that are themselves OpenMP programs:
// PyTorch's ATen (posenc.torch uses it when torch's parallel backend is
// OpenMP), ggml, any `#pragma omp` application. Each ParallelFor is one
// parallel region of num_threads threads on the same OpenMP runtime, so it
// runs on the threads the host's own regions use. A separate pool would
// compete with them: libgomp's threads keep spinning after a region ends
// (GOMP_SPINCOUNT), and a posenc call right after a torch op shared the
// cores with them (docs/PERFORMANCE.md, "Sharing torch's OpenMP threads").
// Waiting policy, thread limits and binding follow the host's OpenMP
// settings (OMP_WAIT_POLICY, OMP_THREAD_LIMIT, ...).
//
// Thread safety (tests/unit/concurrency_test.cc, run under ThreadSanitizer
// by the tsan preset):
//  - one Context may be shared by any number of threads calling posenc
//    functions at once: concurrent ParallelFor calls on it take turns (each
//    call gets all of its workers, one call at a time), and results are
//    identical to serial calls; kernels keep no state in the Context (their
//    per-worker scratch belongs to the call);
//  - ParallelFor called from inside a task of the same Context (nesting)
//    runs the inner tasks inline on the calling worker instead of
//    deadlocking;
//  - separate Contexts share nothing and run fully in parallel;
//  - kOpenMP: concurrent ParallelFor calls from different threads run at
//    once, each on its caller's OpenMP team; one from inside any active
//    OpenMP parallel region (a posenc task or the host's own) runs inline
//    on the calling thread as worker 0;
//  - set_backend is a plain write: do not call it while another thread is
//    using the same Context; moving or destroying a Context while a call is
//    running on it is undefined, as for any object.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <type_traits>

namespace posenc {

enum class Backend : std::uint8_t { kAuto, kScalar, kSimd };

std::string_view BackendName(Backend backend);  // "auto", "scalar", "simd"
Backend ParseBackend(std::string_view text, std::string_view arg = "backend");

// Whose threads run a Context's tasks (see above).
enum class Workers : std::uint8_t {
  kPool,    // posenc's own: num_threads - 1 threads started by the Context
  kOpenMP,  // the calling thread's OpenMP team, one parallel region per call
};

std::string_view WorkersName(Workers workers);  // "pool", "openmp"
Workers ParseWorkers(std::string_view text, std::string_view arg = "workers");
// Whether this build of posenc has OpenMP (CMake option POSENC_OPENMP, on
// where the compiler has it; the WebAssembly build has none).
bool OpenMPAvailable();

class ThreadPool;  // defined in src/threading

class Context {
 public:
  // num_threads: 1 = run on the calling thread only; 0 = one per hardware
  // thread. Throws InvalidArgument for a negative count or more than 1024.
  // backend kAuto: the environment variable POSENC_BACKEND (auto, scalar or
  // simd), when set and not empty, picks the backend instead, so that a
  // whole program (the CLI, an engine) can run on the scalar reference
  // without a code change; any other value throws InvalidArgument naming
  // POSENC_BACKEND.
  // workers kOpenMP throws InvalidArgument (naming "workers") in a build
  // without OpenMP (OpenMPAvailable()).
  // workers kPool: between calls the pool's threads poll for the next one
  // for 50 microseconds, yielding the core every few polls, before they
  // sleep (waking a sleeping thread costs about as long on a VM); the
  // caller polls as long for them to finish. The environment variable
  // POSENC_POOL_SPIN_US sets that time for every Context made after it is
  // set (a whole number in [0, 100000]; 0: sleep at once); any other value
  // throws InvalidArgument naming POSENC_POOL_SPIN_US.
  explicit Context(int num_threads = 1, Backend backend = Backend::kAuto,
                   Workers workers = Workers::kPool);
  ~Context();
  Context(Context&&) noexcept;
  Context& operator=(Context&&) noexcept;
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  int num_threads() const { return num_threads_; }
  Backend backend() const { return backend_; }
  Workers workers() const { return workers_; }
  void set_backend(Backend backend) { backend_ = backend; }

  // Runs fn(task, worker) for every task in [0, num_tasks); worker is in
  // [0, num_threads()). Blocks until all tasks finish. If a task throws, the
  // first exception is rethrown here after the others finish. Safe to call
  // from several threads at once and from inside a task (see above).
  void ParallelFor(std::int64_t num_tasks,
                   const std::function<void(std::int64_t task, int worker)>& fn) const;
  // Any other callable (a lambda): passed by reference, never copied, so a
  // call allocates nothing (a std::function made from a lambda with more
  // than two captures would take a heap block on every call).
  template <typename Fn>
  requires(!std::is_same_v<std::remove_cvref_t<Fn>, std::function<void(std::int64_t, int)>> &&
           std::is_invocable_v<Fn&, std::int64_t, int>) void ParallelFor(std::int64_t num_tasks,
                                                                         Fn&& fn) const {
    const std::function<void(std::int64_t, int)> by_reference = std::ref(fn);
    ParallelFor(num_tasks, by_reference);
  }

  // Runs fn(worker) exactly once on each of the context's threads (the
  // calling thread as worker 0), e.g. to release per-thread state. From
  // inside a task of this context: on the calling thread only.
  void RunOnEachThread(const std::function<void(int worker)>& fn) const;

 private:
  int num_threads_;
  Backend backend_;
  Workers workers_;
  std::unique_ptr<ThreadPool> pool_;
};

// Frees the scratch that posenc keeps between calls (c.h, "Memory"): the
// calling thread's and that of every thread of `ctx`. The calls an engine
// makes per token keep their buffers (frequency tables, cos/sin blocks,
// decode partials and blocks) so that the next call allocates nothing; this
// hands that memory back, and the next call allocates it again. Call it when
// no posenc call is running on the calling thread or on ctx.
void ReleaseThreadScratch(const Context& ctx);

// Name of the SIMD target the kSimd backend dispatches to on this CPU
// ("AVX3_ZEN4", "AVX2", "SSE4", "EMU128", ...).
std::string_view SimdTargetName();

}  // namespace posenc
