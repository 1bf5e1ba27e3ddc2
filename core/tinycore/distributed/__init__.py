"""tinycore.distributed: one program over many processes and hosts, through an established collective engine
(MPI or gloo on host memory, NCCL/RCCL on GPUs). Launch with mpirun/srun/torchrun; see docs/distributed.md.

  from tinycore import distributed as dist
  dist.init()                      # rank, world size from the launcher's environment
  y = dist.allreduce(x, "mean")    # also allgather, reduce_scatter, broadcast, send/recv, barrier
  opt = dist.DataParallel(nn.optim.SGD(params, lr))   # gradients averaged across ranks, overlapped with backward
  w = dist.shard(W, axis=0)        # this rank's rows of W; w @ x, w.sum(0), w.full() communicate where needed"""
from tinycore.distributed.launcher import LaunchInfo, from_environment
from tinycore.distributed.engine import CollectiveEngine, CollectiveError, CollectiveTimeout, REDUCE_OPS
from tinycore.distributed.group import init, is_initialized, rank, world_size, local_rank, shutdown, get_engine
from tinycore.distributed.collectives import allreduce, allgather, reduce_scatter, broadcast, send, recv, barrier
from tinycore.distributed.data_parallel import allreduce_grads, broadcast_params, DataParallel, GradBuckets
from tinycore.distributed.sharded import RankSharded, shard, from_local, matmul

__all__ = ["LaunchInfo", "from_environment", "CollectiveEngine", "CollectiveError", "CollectiveTimeout", "REDUCE_OPS",
           "init", "is_initialized", "rank", "world_size", "local_rank", "shutdown", "get_engine",
           "allreduce", "allgather", "reduce_scatter", "broadcast", "send", "recv", "barrier",
           "allreduce_grads", "broadcast_params", "DataParallel", "GradBuckets", "RankSharded", "shard", "from_local", "matmul"]
