"""Translation: what training logged (any framework's names) -> the rows the store keeps.

A logged name is resolved through the registry to a canonical id, its declared transform applied
(SB3's negative entropy negated, ...), its value checked against the bad-input policy and the
metric's physical limits; non-finite values become counts and `health` events, a step going back
a `resume` event, unknown names `unregistered` rows. Two paths, one result:

- `steps`: `Translator`, one log call at a time (the Python API's worker, followed logs), and the
  cheap checks `Run.log` runs on the caller's thread under `strict`.
- `blocks`: `BlockTranslator`, a log's steps a column at a time with numpy (the direct import,
  and a run's worker for a log reader's blocks);
  whatever its plan cannot say goes through `Translator` step by step. A test compares the two.
- `derive`: `StepDeriver`, the metrics the registry declares as derived, computed per step.
- `auto_read`: the run's one decision, per unknown name, of whether it is read as a metric by
  itself (the registry's `AutoMap` rules, at its first value; recorded, kept on resume).

May import: `registry`, `exporter.config`, `.counts`, `.errors`, `.schema` (the rows it returns),
`exporter.sources` (the `ScalarBlock` it reads). Never the store, InfluxDB or Prometheus.
"""

from .blocks import BlockTranslator, FastSteps
from .derive import StepDeriver
from .steps import LoggedValue, Translator

__all__ = ["BlockTranslator", "FastSteps", "LoggedValue", "StepDeriver", "Translator"]
