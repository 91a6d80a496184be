# Probe: capture-time attribution of CUDA-graph kernels, in the cases the one-graph reference probe
# (shared/reference-captures/h200/cudagraph_probe.py) leaves out. Needs a CUDA GPU, torch and the
# `nvtx` PyPI package; small tensors, runs in seconds. Run it under Nsight Systems (whole run, no
# capture range) and export SQLite:
#
#   nsys profile -t cuda,nvtx --sample=none --cpuctxsw=none --cuda-graph-trace=node \
#       --force-overwrite=true -o graph_probe python3 benchmarks/graph_probe.py
#   nsys export --type sqlite --force-overwrite=true -o graph_probe.sqlite graph_probe.nsys-rep
#
# tests/graph_truth.py gives the expected path of each graph kernel of such an export.
#
# Under torch.profiler instead (`python3 benchmarks/graph_probe.py --kineto probe.json`): the
# ranges are record_function ranges, the whole run is profiled on every thread
# (profile_all_threads) and written as Kineto JSON. Kineto ties a replayed kernel only to its
# cudaGraphLaunch; the capture-time launches recorded in the run are what place it.
#
# What it exercises (the structure is fixed; only timings vary from run to run):
# * Four CUDA graphs. On the main thread, inside an NVTX range open on that thread before the
#   capture began ("warmup_and_capture", which is the captures' context and is dropped from the
#   kernels' paths): "model" (x * 0.5, then block_00 and block_01) and "head" (head > proj|act).
#   On two worker threads, each with its own torch.cuda.Stream and its own graph, inside a
#   "worker_K_capture" context range: "w0" (x + 1, then block_10) and "w1" (x + 1, block_20).
# * Ranges 3 deep inside the captured region: block_NN > attn|mlp > proj|act, with the residual
#   adds directly under block_NN (2 deep) and head's last multiply directly under head.
# * Kernels captured directly under the capture context, with no range of their own (the model's
#   x * 0.5, the workers' x + 1): they keep only their launch path ("step_0").
# * Two captures overlapping in time: the workers start capturing after a threading.Barrier and
#   meet at a second one in the middle of their captures (between attn and mlp), so both captures
#   are underway together (printed as "captures overlapped"). They capture with the
#   "thread_local" stream-capture mode, through CUDAGraph.capture_begin/capture_end on their own
#   stream: torch.cuda.graph's __enter__ calls torch.cuda.synchronize() and empty_cache(), and a
#   device-wide synchronize (and the allocator's empty_cache) is not allowed while another
#   thread's stream is capturing. The main thread's captures use torch.cuda.graph(g, stream=...,
#   capture_error_mode="thread_local").
# * Replays inside step_i ranges (each step also runs an eager "loss" after its replays):
#     step_0  main thread    model
#     step_1  main thread    model, head          (one step replaying two graphs)
#     step_2  worker 0       w1                   (captured on worker 1)
#     step_3  worker 1       model                (captured on the main thread)
#     step_4  main thread    w0, w1               (both captured on workers)
#   (step_2 and step_3 run at the same time, on two threads.)
# * Eager (non-graph) kernels in ranges too: the warm-ups (warmup_and_capture > warmup >
#   block_NN > ..., worker_K_warmup > block_K0 > ...) and each step's loss (step_i > loss).
#
# Expected paths of graph kernels (launch path + ranges opened after BeginCapture), e.g.
#   step_0, step_0/block_00/attn/proj, step_0/block_00, step_1/head/act, step_1/head,
#   step_2/block_20/mlp/act, step_3/block_01/attn/act, step_4/block_10/mlp/proj.
# Prints one summary line at the end.

import sys
import threading
import time

import nvtx
import torch

annotate = nvtx.annotate  # record_function under --kineto

D, TOKENS = 256, 64


def block(name, h, w, between=None):
    """block_NN > attn > proj|act, residual add, [between()], mlp > proj|act, residual add."""
    with annotate(name):
        with annotate("attn"):
            with annotate("proj"):
                a = h @ w["q"]
            with annotate("act"):
                a = torch.softmax(a, dim=-1)
        h = h + a  # directly under block_NN
        if between is not None:
            between()
        with annotate("mlp"):
            with annotate("proj"):
                m = h @ w["up"]
            with annotate("act"):
                m = torch.nn.functional.gelu(m)
        return h + m  # directly under block_NN


def model(x, ws):
    h = x * 0.5  # no range of its own: under the capture context only
    h = block("block_00", h, ws[0])
    return block("block_01", h, ws[1])


def head(h, w):
    with annotate("head"):
        with annotate("proj"):
            logits = h @ w
        with annotate("act"):
            p = torch.softmax(logits, dim=-1)
        return p * 2.0  # directly under head


def worker_body(k, x, w, between=None):
    h = x + 1.0  # no range of its own: under the capture context only
    return block(f"block_{k + 1}0", h, w, between)


def loss(*outs):
    with annotate("loss"):
        return sum(o.float().square().mean() for o in outs)


def weights(n):
    return [{"q": torch.randn(D, D, device="cuda") / D ** 0.5, "up": torch.randn(D, D, device="cuda") / D ** 0.5}
            for _ in range(n)]


def main() -> int:
    if not torch.cuda.is_available():
        print("graph_probe: needs a CUDA GPU (torch.cuda.is_available() is False)", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    x = torch.randn(TOKENS, D, device="cuda")
    ws, w_head = weights(2), torch.randn(D, D, device="cuda") / D ** 0.5
    xw = [torch.randn(TOKENS, D, device="cuda") for _ in range(2)]
    ww = [weights(1)[0] for _ in range(2)]
    streams = [torch.cuda.Stream() for _ in range(3)]  # main's capture stream, then one per worker
    losses = []

    # Main thread: warm up eagerly on the capture stream, then capture model and head, all inside
    # one range opened before the captures (their context).
    g_model, g_head = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
    s = streams[0]
    s.wait_stream(torch.cuda.current_stream())
    with annotate("warmup_and_capture"):
        with annotate("warmup"), torch.cuda.stream(s):
            for _ in range(2):
                head(model(x, ws), w_head)
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(g_model, stream=s, capture_error_mode="thread_local"):
            y_model = model(x, ws)
        with torch.cuda.graph(g_head, stream=s, capture_error_mode="thread_local"):
            y_head = head(y_model, w_head)
    torch.cuda.synchronize()

    with annotate("step_0"):
        g_model.replay()
        losses.append(loss(y_model))
    with annotate("step_1"):
        g_model.replay()
        g_head.replay()
        losses.append(loss(y_model, y_head))
    torch.cuda.synchronize()  # nothing of the main thread's is in flight while the workers capture

    # Two workers capture at the same time, each on its own stream, then replay: worker 0 the
    # graph worker 1 captured (step_2), worker 1 the main thread's model graph (step_3).
    graphs = [torch.cuda.CUDAGraph() for _ in range(2)]
    outs = [None, None]
    windows = [None, None]  # (capture begin, capture end), perf_counter_ns
    errors = []
    start = threading.Barrier(2, timeout=120)
    middle = threading.Barrier(2, timeout=120)
    captured = threading.Barrier(2, timeout=120)
    worker_losses = [None, None]

    def worker(k):
        try:
            s = streams[1 + k]
            with torch.cuda.stream(s):
                with annotate(f"worker_{k}_warmup"):
                    for _ in range(2):
                        worker_body(k, xw[k], ww[k])
                s.synchronize()
                start.wait()
                with annotate(f"worker_{k}_capture"):
                    t0 = time.perf_counter_ns()
                    graphs[k].capture_begin(capture_error_mode="thread_local")
                    try:
                        outs[k] = worker_body(k, xw[k], ww[k], between=middle.wait)
                    finally:
                        graphs[k].capture_end()
                    windows[k] = (t0, time.perf_counter_ns())
                s.synchronize()
                captured.wait()  # both graphs exist and their warm-up work is done
                with annotate(f"step_{2 + k}"):
                    if k == 0:
                        graphs[1].replay()
                        worker_losses[0] = loss(outs[1])
                    else:
                        g_model.replay()
                        worker_losses[1] = loss(y_model)
                s.synchronize()
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(f"worker {k}: {type(e).__name__}: {e}")
            for b in (start, middle, captured):
                b.abort()

    threads = [threading.Thread(target=worker, args=(k,), name=f"worker_{k}") for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        print("graph_probe: failed: " + "; ".join(errors), file=sys.stderr)
        return 1
    losses += worker_losses

    with annotate("step_4"):
        graphs[0].replay()
        graphs[1].replay()
        losses.append(loss(outs[0], outs[1]))
    torch.cuda.synchronize()

    overlapped = max(w[0] for w in windows) < min(w[1] for w in windows)
    values = " ".join(f"{float(v):.4f}" for v in losses)
    print(f"graph_probe ok: 4 graphs (model, head on main; w0, w1 on two worker threads), 7 replays in 5 steps,"
          f" captures overlapped: {'yes' if overlapped else 'NO'}, losses {values}")
    return 0


def profiled(out: str) -> int:
    """``main`` under torch.profiler on every thread, its trace written to ``out``."""
    global annotate
    from torch._C._profiler import _ExperimentalConfig
    from torch.profiler import ProfilerActivity, profile, record_function

    annotate = record_function
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                 experimental_config=_ExperimentalConfig(profile_all_threads=True)) as prof:
        code = main()
    prof.export_chrome_trace(out)
    return code


if __name__ == "__main__":
    if sys.argv[1:2] == ["--kineto"]:
        sys.exit(profiled(sys.argv[2]))
    sys.exit(main())
