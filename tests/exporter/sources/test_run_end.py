"""Console lines that say how a run ended (exporter/sources/run_end.py), on the lines the trainers
print: HF Trainer's dicts (its final one: `Trainer._finalize_training` in transformers 5.24 logs
train_runtime, train_loss and total_flos together), verl's `step:N - k:v` lines and its
`Final validation metrics:` (verl/trainer/ppo/ray_trainer.py), Ray's `(TaskRunner pid=…)` prefix,
and Python tracebacks."""

from __future__ import annotations

import pprint
from pathlib import Path

from exporter.sources import EndMark, EndScanner, RegexParser, closing_record
from exporter.sources.linefile import LineFileSource
from exporter.sources.run_end import line_kind, strip_prefix

HF_FINAL = (
    "{'train_runtime': 41.2093, 'train_samples_per_second': 6.212, "
    "'train_steps_per_second': 0.776, 'total_flos': 0.0, 'train_loss': 0.0532, 'epoch': 2.0}"
)
HF_STEP = "{'loss': 0.0512, 'grad_norm': 0.93, 'learning_rate': 4.5e-06, 'epoch': 0.4}"
# a periodic log with `include_num_input_tokens_seen`: train_runtime, not the closing record
HF_TOKENS = "{'loss': 0.05, 'num_input_tokens_seen': 2048, 'train_runtime': 3.1, 'epoch': 0.2}"
VERL_STEP = "(TaskRunner pid=2127) step:37 - actor/pg_loss:-0.012 - actor/ppo_kl:0.0004"
VERL_FINAL = "(TaskRunner pid=2127) Final validation metrics: {'val-core/gsm8k/reward/mean@1': 0.7}"
TRACEBACK = [
    "\x1b[36m(TaskRunner pid=2127)\x1b[0m Traceback (most recent call last):",
    '(TaskRunner pid=2127)   File "/app/verl/trainer/main_ppo.py", line 42, in run',
    "(TaskRunner pid=2127)     trainer.fit()",
    "(TaskRunner pid=2127)     ^^^^^^^^^^^^^",
    "(TaskRunner pid=2127) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
]


def test_each_line_kind() -> None:
    assert line_kind(HF_FINAL) == "closing"
    # a progress bar's carriage returns before the dict, as tqdm leaves them in a log file
    assert line_kind("100%|##########| 10/10 [00:41<00:00]\r" + HF_FINAL) == "closing"
    assert line_kind("  train_runtime            = 0:00:41.20") == "closing"
    assert line_kind(VERL_FINAL) == "closing"
    assert line_kind(TRACEBACK[0]) == "traceback"
    for line in (HF_STEP, HF_TOKENS, VERL_STEP, "Traceback is a word", "{'train_runtime': 1"):
        assert line_kind(line) is None, line


def test_verls_closing_line_is_read_as_pprint_prints_it() -> None:
    # verl prints `pprint(f"Final validation metrics: {metrics}")`: the string's repr, so in
    # quotes (double when the metrics hold single ones) and, past 80 characters, a parenthesised
    # run of quoted pieces; published verl-data and dstack-configs logs print each of these
    metrics = {"val-core/openai/gsm8k/reward/mean@1": 0.867, "val-aux/num_turns/min": 2}
    printed = [
        pprint.pformat("Final validation metrics: None"),
        pprint.pformat("Final validation metrics: {'test_score/openai/gsm8k': 0.519}"),
        pprint.pformat(f"Final validation metrics: {metrics}"),
    ]
    assert printed[0].startswith("'") and printed[1].startswith('"')
    assert printed[2].startswith('("') and "\n" in printed[2]  # the long one is wrapped
    for text in printed:
        first = text.splitlines()[0]
        assert line_kind(f"(TaskRunner pid=14640) {first}") == "closing", first
    assert line_kind("(TaskRunner pid=1) 'Final validation' is printed later") is None


def test_ray_and_colour_prefixes_are_stripped() -> None:
    assert strip_prefix(TRACEBACK[0]) == "Traceback (most recent call last):"
    assert strip_prefix("(WorkerDict pid=45, ip=10.0.0.2) hello") == "hello"
    assert strip_prefix(VERL_STEP).startswith("step:37 - ")


def test_a_traceback_is_a_crash_at_its_exception_line() -> None:
    scanner = EndScanner()
    marks = [scanner.feed(line, n) for n, line in enumerate([VERL_STEP, *TRACEBACK], start=1)]
    assert marks[:-1] == [None] * 5
    assert marks[-1] == EndMark(
        "crash", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", 6
    )


def test_a_chained_traceback_ends_at_the_last_exception() -> None:
    scanner = EndScanner()
    lines = [
        "Traceback (most recent call last):",
        '  File "a.py", line 1, in <module>',
        "KeyError: 'x'",
    ]
    assert [scanner.feed(x) for x in lines][-1] == EndMark("crash", "KeyError: 'x'")
    chained = [
        "Traceback (most recent call last):",
        '  File "a.py", line 1, in <module>',
        "",
        "During handling of the above exception, another exception occurred:",
        "",
        "Traceback (most recent call last):",
        '  File "a.py", line 3, in <module>',
        "RuntimeError: NCCL communicator was aborted",
    ]
    marks = [scanner.feed(x) for x in chained]
    assert marks[-1] == EndMark("crash", "RuntimeError: NCCL communicator was aborted")
    assert marks[:-1] == [None] * 7


def test_a_ray_task_error_raised_in_the_driver_is_a_crash_at_its_exception_line() -> None:
    # verl's driver prints the remote failure as Ray's dual exception class, named after its
    # cause (ray python/ray/exceptions.py: `RayTaskError({cause}.__name__)`), then the
    # remote frames without a `Traceback` header of their own (a real verl log, issue 34)
    scanner = EndScanner()
    lines = [
        VERL_STEP,
        "Traceback (most recent call last):",
        '  File "/venv/lib/verl/trainer/main_ppo.py", line 96, in run_ppo',
        "    ray.get(runner.run.remote(config))",
        "ray.exceptions.RayTaskError(RuntimeError): \x1b[36mray::TaskRunner.run()\x1b[39m "
        "(pid=4611, ip=10.0.0.2, actor_id=ab12)",
        '  File "/venv/lib/verl/trainer/ppo/ray_trainer.py", line 807, in _save_checkpoint',
        "RuntimeError: [enforce fail at inline_container.cc:815] . file write failed",
    ]
    marks = [scanner.feed(line, n) for n, line in enumerate(lines, start=1)]
    crashes = [m for m in marks if m is not None]
    assert crashes == [
        EndMark(
            "crash",
            "ray.exceptions.RayTaskError(RuntimeError): ray::TaskRunner.run() "
            "(pid=4611, ip=10.0.0.2, actor_id=ab12)",
            5,
        )
    ]


def test_closing_record_from_a_records_names() -> None:
    assert closing_record(["train_runtime", "train_loss", "total_flos", "epoch"])
    assert closing_record(["train/train_runtime", "train/train_loss", "train/total_flos"])
    assert closing_record(["train_runtime", "loss", "num_input_tokens_seen"]) is None
    assert closing_record(["time/total_timesteps", "train/loss"]) is None


def test_a_console_log_yields_its_end_marks_among_its_records(tmp_path: Path) -> None:
    path = tmp_path / "train.log"
    path.write_text("\n".join([VERL_STEP, *TRACEBACK]) + "\n", encoding="utf-8")
    parser = RegexParser(r"step:(?P<step>\d+) - actor/pg_loss:(?P<actor__pg_loss>[-\d.e]+)")
    source = LineFileSource(path, parser, lambda m: None, console=True)
    items = list(source.poll_marked(final=True))
    assert [type(i).__name__ for i in items] == ["Record", "EndMark"]
    assert isinstance(items[1], EndMark) and items[1].line == 6
    # the plain Records of the same file, as `poll` gives them
    assert [r.step for r in LineFileSource(path, parser, lambda m: None).poll(final=True)] == [37]
    source.close()
