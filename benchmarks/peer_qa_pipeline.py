"""The peer of `qa_inference.py`: transformers 4.x `pipeline("question-answering")`.

Runs in its own virtual environment (transformers<5: the task was removed in transformers 5),
for example `benchmarks/.peer-venv/bin/python benchmarks/peer_qa_pipeline.py ...`. Reads the
benchmark questions (JSONL: id, question, context) and answers them with the pipeline.

Two modes:
- one shot (default): at each batch size and maximum answer length asked for, a short warm-up
  and then the fastest of `--repeats` timed runs; writes one JSON object to `--out`:
  `{"versions": {...}, "runs": [{"batch_size", "max_answer_len", "seconds", "predictions": {id: text}}]}`.
- `--serve`: loads the pipeline once, prints a `READY {versions}` line, then answers requests
  read from standard input, one JSON object a line (`{"batch_size": 32, "max_answer_len": 64,
  "warmup": false}`), each with one line `RESULT {"batch_size", "max_answer_len", "seconds",
  "predictions"}` (a warm-up request answers only the first `--warmup` questions). It stops at
  the end of its input. `qa_inference.py` uses this to interleave the peer's repeats with its own.
Only the answering loop is timed (model loading is not).
"""

import argparse
import json
import sys
import time


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--questions", required=True)
    p.add_argument("--out", default=None, help="the one-shot result (JSON); required without --serve")
    p.add_argument(
        "--serve", action="store_true", help="answer timing requests from standard input (see the docstring)"
    )
    p.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 32])
    p.add_argument("--max-answer-len", type=int, nargs="+", default=[15])
    p.add_argument("--max-seq-len", type=int, default=384)
    p.add_argument("--doc-stride", type=int, default=128)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--warmup", type=int, default=4)
    p.add_argument("--repeats", type=int, default=1, help="time each run this many times, keep the fastest")
    args = p.parse_args(argv)
    if not args.serve and not args.out:
        p.error("--out is required without --serve")

    import torch
    import transformers
    from transformers import pipeline

    if args.threads:
        torch.set_num_threads(args.threads)
    rows = [json.loads(line) for line in open(args.questions, encoding="utf-8") if line.strip()]
    qa = pipeline("question-answering", model=args.model, tokenizer=args.model, device=-1)
    inputs = [{"question": r["question"], "context": r["context"]} for r in rows]
    versions = {
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
    }

    def answer(n, bs, mal):
        "Seconds and {id: answer} of the pipeline over the first `n` questions."
        t0 = time.perf_counter()
        out = qa(
            inputs[:n], batch_size=bs, max_answer_len=mal, max_seq_len=args.max_seq_len, doc_stride=args.doc_stride
        )
        secs = time.perf_counter() - t0
        out = out if isinstance(out, list) else [out]
        return secs, {r["id"]: o["answer"] for r, o in zip(rows, out)}

    if args.serve:
        print("READY " + json.dumps(versions), flush=True)
        for line in sys.stdin:
            if not line.strip():
                continue
            req = json.loads(line)
            n = args.warmup if req.get("warmup") else len(inputs)
            secs, preds = answer(n, int(req["batch_size"]), int(req["max_answer_len"]))
            print(
                "RESULT "
                + json.dumps(
                    {
                        "batch_size": req["batch_size"],
                        "max_answer_len": req["max_answer_len"],
                        "seconds": secs,
                        "predictions": preds,
                    }
                ),
                flush=True,
            )
        return
    runs = []
    for mal in args.max_answer_len:
        for bs in args.batch_sizes:
            answer(args.warmup, bs, mal)
            secs = float("inf")
            for _ in range(max(1, args.repeats)):
                s, preds = answer(len(inputs), bs, mal)
                if s < secs:
                    secs, best = s, preds
            runs.append({"batch_size": bs, "max_answer_len": mal, "seconds": secs, "predictions": best})
            print(f"peer pipeline batch_size={bs} max_answer_len={mal}: {len(rows) / secs:.2f} q/s", flush=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"versions": versions, "runs": runs}, f)


if __name__ == "__main__":
    main()
