// Package bench is Corral's load harness (issue 6): it measures the
// gateway the way gateways publish their numbers, from outside, as
// processes on one host, and reports ratios taken in one run, because a
// shared 2-core machine drifts too much for absolute numbers to compare
// across runs.
//
// Run builds cmd/gateway and cmd/mockllm, starts the mock, a private
// redis-server, a bare net/http/httputil.ReverseProxy (the floor; this
// package's own executable started again, see MaybeRunFloor) and one or
// more gateways, each a separate process on a free loopback port. With
// taskset the proxy under test is pinned to CPU 0 and the load generator
// (this process), the mock and Redis to CPU 1.
//
// The scenarios: overhead of the upstream path against the mock and the
// floor (fixed concurrency and fixed rate), the hit path, stampedes of
// identical requests over 1 and 3 instances, streaming time to first byte
// (leaders and followers), and memory per open stream. Every comparison
// alternates its sides over several repetitions and reports the median
// and the range; ratios are taken repetition by repetition. The load
// generator is a small net/http client of its own, not a library: it
// needs each answer's X-Corral-Cache header, the first byte of SSE
// streams and the answer time of every request of a burst.
//
// With Options.PprofDir (corralbench -pprof) every gateway also serves
// net/http/pprof on its own loopback port, and each load run of a
// comparison against a gateway saves a CPU and an allocation profile of
// its measured window (see pprof.go); the footprint scenario saves heap
// and goroutine profiles of the gateway and of the floor, idle and with
// the streams open (footprintProfiles).
//
// The command is bench/cmd/corralbench (`make bench`); the numbers and
// what they mean are in docs/benchmarks.md.
package bench
