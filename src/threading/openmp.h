// Internal: Workers::kOpenMP (posenc/context.h), a Context's tasks on the
// calling thread's OpenMP team. threading/openmp.cc is compiled with the
// compiler's OpenMP flags where CMake finds them (POSENC_OPENMP); without
// them it only reports that OpenMP is missing.
#pragma once

#include <cstdint>
#include <functional>

namespace posenc::openmp {

bool Built();  // compiled with OpenMP (_OPENMP)
// Throws InvalidArgument naming "workers" unless Built().
void RequireBuilt();

// Every task once, on one parallel region of num_threads threads (tasks
// handed out through an atomic counter, as the pool does); inside an active
// parallel region (nesting): inline on the caller as worker 0. The first
// exception is rethrown after the others finish. Requires Built().
void Run(int num_threads, std::int64_t num_tasks, const std::function<void(std::int64_t, int)>& fn);
// fn(worker) once on each thread of one parallel region of num_threads
// threads (the caller only, inside an active region). Requires Built().
void RunOnEachThread(int num_threads, const std::function<void(int)>& fn);

}  // namespace posenc::openmp
