"""Where the Hugging Face Trainer's printed dicts belong: the optimizer step of each.

`Trainer.log` passes its logs to the progress callback without the step (transformers
trainer.py `Trainer.log`: the step goes to `log_history` only), and the callback prints them
with `tqdm.write` (trainer_callback.py `ProgressCallback.on_log`). `tqdm.write` clears the
training bar (a carriage return, spaces, a carriage return), writes the dict to stdout, and
redraws the bar at its current count, which the Trainer updated to the global step just before
logging (`on_step_end` runs before `_maybe_log_save_evaluate`). So in a file holding both
streams (`> log 2>&1`), every clearing followed by a redraw of the description-less training
bar is one printed dict, at the step the redraw shows, in order:

- stdout unbuffered: the dict sits between its clearing and its redraw;
- stdout buffered (Python's default into a file): the clearings and redraws are in the file as
  they happened (stderr is unbuffered) and the dicts arrive later in bursts, in the same order.

Either way the k-th dict belongs to the k-th clearing's redraw. Dicts with no such event (the
bars went elsewhere; `PrinterCallback` prints without a bar) are placed by their epoch once one
dict anchored the steps per epoch (`Trainer.log` adds `epoch` = global step / steps per epoch),
else by their place among the training dicts times the logging cadence (1 when not known), and
an evaluation or closing dict at the step trained last.
"""

from __future__ import annotations

from collections import deque

from .console_text import progress

__all__ = ["TrainerDicts"]

Placed = tuple[int, dict[str, float]]


class TrainerDicts:
    """Places printed Trainer dicts at their steps, as the bar events and the dicts arrive."""

    def __init__(self, cadence: int | None) -> None:
        self.cadence = cadence
        self._writes: deque[int] = deque()  # steps of clearings not matched to a dict yet
        # (values, training, its place among the training dicts)
        self._held: deque[tuple[dict[str, float], bool, int]] = deque()
        self._clearing = False  # a clearing was seen; its redraw gives the step
        self._owed = 0  # dicts placed before their clearing's redraw was read
        self._per_epoch: float | None = None
        self._trained = 0  # training dicts seen
        self._last: int | None = None
        self.by_bar = False
        """Some dict was placed by the bar (else by logging order)."""

    @property
    def holding(self) -> bool:
        return bool(self._held)

    def segments(self, raw: list[str]) -> list[Placed]:
        """The carriage-return segments of one line, in order: clearings and the training
        bar's redraws (bars with a description are other tools': vLLM, dataset maps)."""
        out: list[Placed] = []
        for segment in raw:
            if not segment:
                continue
            if not segment.strip():
                self._clearing = True
                continue
            if self._clearing and "%|" in segment:
                bar = progress(segment)
                if bar is not None and not bar.desc:
                    self._clearing = False
                    if self._owed:
                        self._owed -= 1  # its dict was placed already
                    else:
                        self._writes.append(bar.n)
                        out += self._match()
        return out

    def add(self, values: dict[str, float], *, training: bool) -> list[Placed]:
        if training:
            self._trained += 1
        self._held.append((values, training, self._trained))
        return self._match()

    def flush(self) -> list[Placed]:
        """Place the dicts still waiting (the end of a read): by epoch, order or last step."""
        out: list[Placed] = []
        while self._held:
            values, training, place = self._held.popleft()
            if self._clearing:
                self._owed += 1  # its redraw is yet to come: it must not place another dict
            out.append(self._placed(self._guess(values, training, place), values, training))
        return out

    def _match(self) -> list[Placed]:
        out: list[Placed] = []
        while self._writes and self._held:
            step = self._writes.popleft()
            values, training, _ = self._held.popleft()
            epoch = values.get("epoch")
            if training and epoch and epoch > 0 and step > 0:
                self._per_epoch = step / epoch
            self.by_bar = True
            out.append(self._placed(step, values, training))
        return out

    def _guess(self, values: dict[str, float], training: bool, place: int) -> int:
        epoch = values.get("epoch")
        if self._per_epoch is not None and epoch is not None:
            step = round(epoch * self._per_epoch)
            if self.cadence and training:
                step = max(self.cadence, round(step / self.cadence) * self.cadence)
            return step
        if not training:
            return self._last if self._last is not None else 0
        if self.by_bar and self._last is not None:
            return self._last + (self.cadence or 1)
        return place * (self.cadence or 1)

    def _placed(self, step: int, values: dict[str, float], training: bool) -> Placed:
        if training or self._last is None:
            self._last = step if self._last is None else max(self._last, step)
        return step, values
