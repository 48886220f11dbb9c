"""The peer of `qa_inference.py`: transformers 4.x `pipeline("question-answering")`.

Runs in its own virtual environment (transformers<5: the task was removed in transformers 5),
for example `benchmarks/.peer-venv/bin/python benchmarks/peer_qa_pipeline.py ...`. Reads the
benchmark questions (JSONL: id, question, context), answers them with the pipeline at each
batch size asked for, and writes one JSON object to `--out`:
`{"versions": {...}, "runs": [{"batch_size", "max_answer_len", "seconds", "predictions": {id: text}}]}`.
Only the answering loop is timed (model loading and a short warm-up are not); with `--repeats`
the fastest of that many runs is kept.
"""
import argparse
import json
import time


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--questions", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 32])
    p.add_argument("--max-answer-len", type=int, nargs="+", default=[15])
    p.add_argument("--max-seq-len", type=int, default=384)
    p.add_argument("--doc-stride", type=int, default=128)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--warmup", type=int, default=4)
    p.add_argument("--repeats", type=int, default=1, help="time each run this many times, keep the fastest")
    args = p.parse_args(argv)

    import torch
    import transformers
    from transformers import pipeline
    if args.threads: torch.set_num_threads(args.threads)
    rows = [json.loads(line) for line in open(args.questions, encoding="utf-8") if line.strip()]
    qa = pipeline("question-answering", model=args.model, tokenizer=args.model, device=-1)
    inputs = [{"question": r["question"], "context": r["context"]} for r in rows]
    runs = []
    for mal in args.max_answer_len:
        for bs in args.batch_sizes:
            qa(inputs[:args.warmup], batch_size=bs, max_answer_len=mal, max_seq_len=args.max_seq_len, doc_stride=args.doc_stride)
            secs = float("inf")
            for _ in range(max(1, args.repeats)):
                t0 = time.perf_counter()
                out = qa(inputs, batch_size=bs, max_answer_len=mal, max_seq_len=args.max_seq_len, doc_stride=args.doc_stride)
                secs = min(secs, time.perf_counter() - t0)
            out = out if isinstance(out, list) else [out]
            runs.append({"batch_size": bs, "max_answer_len": mal, "seconds": secs,
                         "predictions": {r["id"]: o["answer"] for r, o in zip(rows, out)}})
            print(f"peer pipeline batch_size={bs} max_answer_len={mal}: {len(rows) / secs:.2f} q/s", flush=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"versions": {"transformers": transformers.__version__, "torch": torch.__version__,
                                "threads": torch.get_num_threads()}, "runs": runs}, f)


if __name__ == "__main__":
    main()
