"""Who am I in the job: rank, world size and local rank, read from the environment the launcher set.

Launchers name the same facts differently: OpenMPI's mpirun (OMPI_COMM_WORLD_*), MPICH/Hydra and PMI-based launchers
(PMI_RANK, PMI_SIZE), PMIx (PMIX_RANK), Slurm's srun (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID) and torchrun (RANK,
WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT). The first launcher whose variables are all present wins, in that
order: mpirun inside a Slurm allocation sets both, and MPI's numbering is the one its engine uses. Values are checked
(integers, 0 <= rank < size) so a mangled environment is an error naming the variable, not a wrong rank."""
from __future__ import annotations
import os
from dataclasses import dataclass

@dataclass(frozen=True)
class LaunchInfo:
  rank: int
  world_size: int
  local_rank: int
  launcher: str                  # which launcher's variables these came from ("none": a plain `python script.py`)
  master_addr: str | None = None # torchrun's rendezvous host (engines that bootstrap over TCP use it)
  master_port: int | None = None

# launcher: (rank variable, size variable, local-rank variable or None)
LAUNCHERS: tuple[tuple[str, str, str, str | None], ...] = (
  ("openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),
  ("pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"),
  ("pmix", "PMIX_RANK", "PMIX_SIZE", "PMIX_LOCAL_RANK"),
  ("slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"),
  ("torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"),
)

def _int(env: dict, key: str, lo: int) -> int:
  raw = env[key].strip()
  try: v = int(raw, 10)
  except ValueError: raise ValueError(f"the launcher variable {key}={env[key]!r} is not an integer") from None
  if v < lo: raise ValueError(f"the launcher variable {key}={v} must be >= {lo}")
  return v

def from_environment(env: dict | None = None) -> LaunchInfo:
  """The job's geometry from `env` (default os.environ); a process started without a launcher is rank 0 of 1."""
  env = dict(os.environ if env is None else env)
  for name, rank_key, size_key, local_key in LAUNCHERS:
    if rank_key not in env or size_key not in env: continue
    rank, size = _int(env, rank_key, 0), _int(env, size_key, 1)
    if rank >= size: raise ValueError(f"{name} launcher: rank {rank} ({rank_key}) is not below the world size {size} ({size_key})")
    local = _int(env, local_key, 0) if local_key and local_key in env else 0
    addr = env.get("MASTER_ADDR") if name == "torchrun" else None
    port = _int(env, "MASTER_PORT", 1) if name == "torchrun" and "MASTER_PORT" in env else None
    if port is not None and port > 65535: raise ValueError(f"the launcher variable MASTER_PORT={port} is not a TCP port")
    return LaunchInfo(rank, size, local, name, addr, port)
  return LaunchInfo(0, 1, 0, "none")
