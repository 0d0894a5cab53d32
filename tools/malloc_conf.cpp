// The rlx binary's jemalloc settings (linked when the build finds jemalloc;
// CMakeLists.txt's RLX_JEMALLOC). jemalloc reads this global as it starts;
// MALLOC_CONF in the environment is read after it and wins.
//
// - Decay off: pages freed stay with the process and are reused, never
//   given back to the kernel and faulted in again. Training frees and
//   reallocates the same large tensors at every step; with pages returned
//   (jemalloc's default: after 10 s, and at once over 8 MB) `rlx sft`
//   faulted 7 M pages a minute on a paravirtualised machine; with them
//   kept, 2-4 K, and it ran 3.5 times as fast as on glibc. Resident memory
//   stays at the high-water mark: a working set, not a leak.
// - One arena: with decay off each arena keeps its own high-water mark, and
//   the default 4 per core held an RL run at 1.97 GB against 1.1 GB with
//   one, at the same pace (small blocks come from per-thread caches).
//   (Thread caches up to 128 KB instead of 32 KB, tried with one arena:
//   0.65 GB and a third slower for the CartPole main job.)
// docs/results/threads-and-memory.md, "An allocator that keeps its pages, linked".
extern "C" {
// NOLINTNEXTLINE: the name and type are jemalloc's interface.
extern const char* malloc_conf;
const char* malloc_conf = "dirty_decay_ms:-1,muzzy_decay_ms:-1,narenas:1";
}
