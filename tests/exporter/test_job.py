"""A process's rank and job, from `rank=` or the launcher's environment (exporter/job.py).

The variables are the launchers' own: torchrun sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
MASTER_PORT and TORCHELASTIC_RUN_ID in every worker (torch/distributed/elastic/agent/server/
local_elastic_agent.py, `_start_workers`), the run id a fresh uuid per `--standalone` launch and
the literal "none" when a multi-node launch gives no `--rdzv-id` (torch/distributed/run.py);
Slurm sets SLURM_PROCID, SLURM_NTASKS, SLURM_JOB_ID and SLURM_STEP_ID in each task.
"""

from __future__ import annotations

import pytest

from exporter.errors import ConfigError
from exporter.job import job_of

TORCHRUN = {
    "RANK": "3",
    "LOCAL_RANK": "3",
    "WORLD_SIZE": "8",
    "MASTER_ADDR": "10.0.0.1",
    "MASTER_PORT": "29500",
    "TORCHELASTIC_RUN_ID": "6d2c7f1e-1111-4a4a-9b9b-123456789abc",
}


def test_a_torchrun_worker_is_its_rank_of_the_launch_named_by_the_rendezvous_id() -> None:
    job = job_of(None, TORCHRUN)
    assert (job.rank, job.world_size, job.firm) == (3, 8, True)
    other = job_of(None, {**TORCHRUN, "RANK": "5"})
    assert other.key == job.key  # every worker of one launch: one job
    again = job_of(None, {**TORCHRUN, "TORCHELASTIC_RUN_ID": "another-launch"})
    assert again.key != job.key  # the next launch: another job


def test_a_multi_node_launch_without_rdzv_id_is_known_by_its_rendezvous_address_only() -> None:
    job = job_of(None, {**TORCHRUN, "TORCHELASTIC_RUN_ID": "none"})
    assert job.rank == 3 and job.key is not None and not job.firm
    moved = job_of(None, {**TORCHRUN, "TORCHELASTIC_RUN_ID": "none", "MASTER_PORT": "29501"})
    assert moved.key != job.key


def test_slurm_tasks_are_ranks_of_their_job_step_and_a_single_task_is_no_rank() -> None:
    env = {"SLURM_PROCID": "2", "SLURM_NTASKS": "4", "SLURM_JOB_ID": "991", "SLURM_STEP_ID": "0"}
    job = job_of(None, env)
    assert (job.rank, job.world_size, job.firm) == (2, 4, True)
    assert job_of(None, {**env, "SLURM_STEP_ID": "1"}).key != job.key  # another srun
    assert job_of(None, {**env, "SLURM_PROCID": "0", "SLURM_NTASKS": "1"}).rank is None


def test_a_world_of_one_or_no_launcher_is_a_single_process() -> None:
    assert job_of(None, {}).rank is None
    assert job_of(None, {**TORCHRUN, "RANK": "0", "WORLD_SIZE": "1"}).rank is None


def test_a_rank_given_by_hand_wins_and_without_a_launcher_the_parent_process_names_the_job() -> (
    None
):
    assert job_of(5, TORCHRUN).rank == 5
    first, second = job_of(0, {}), job_of(1, {})
    assert first.rank == 0 and first.key is not None and first.key == second.key
    assert not first.firm


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"RANK": "x", "WORLD_SIZE": "2"}, "RANK='x'"),
        ({"RANK": "-1", "WORLD_SIZE": "2"}, "RANK='-1'"),
        ({"RANK": "1", "WORLD_SIZE": "0"}, "WORLD_SIZE='0'"),
        ({"RANK": "4", "WORLD_SIZE": "2"}, "rank 4 is not below the world size 2"),
        ({"SLURM_PROCID": "a", "SLURM_NTASKS": "2"}, "SLURM_PROCID='a'"),
    ],
)
def test_a_malformed_launcher_variable_is_refused_with_its_name(
    env: dict[str, str], named: str
) -> None:
    with pytest.raises(ConfigError, match="pass rank=") as info:
        job_of(None, env)
    assert named in str(info.value)
