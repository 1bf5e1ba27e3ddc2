"""HSA's user-mode queue formats as the AMD command processor reads them: the 64-byte AQL packets and the AMD signal.

From the HSA Platform System Architecture and Runtime specifications (1.2: hsa_kernel_dispatch_packet_t,
hsa_barrier_and_packet_t, packet header bits) and AMD's amd_signal_t layout (ROCr's public amd_hsa_signal.h)."""
from __future__ import annotations
import struct

PACKET_SIZE = 64
# header: packet type (bits 0-7), barrier (bit 8), acquire fence scope (9-10), release fence scope (11-12)
TYPE_INVALID, TYPE_KERNEL_DISPATCH, TYPE_BARRIER_AND = 1, 2, 3
BARRIER_BIT, ACQUIRE_SHIFT, RELEASE_SHIFT = 8, 9, 11
SCOPE_NONE, SCOPE_AGENT, SCOPE_SYSTEM = 0, 1, 2

def header(kind: int, barrier: bool = True, acquire: int = SCOPE_SYSTEM, release: int = SCOPE_SYSTEM) -> int:
  return kind | (int(barrier) << BARRIER_BIT) | (acquire << ACQUIRE_SHIFT) | (release << RELEASE_SHIFT)

# hsa_kernel_dispatch_packet_t after its first 4 bytes (header u16, setup u16), which are stored last, in one 32-bit write, so the
# packet processor never sees a valid header over a half-written body:
# workgroup_size xyz (u16 x3), reserved (u16), grid_size xyz in work-items (u32 x3), private_segment_size (u32),
# group_segment_size (u32), kernel_object (u64), kernarg_address (u64), reserved (u64), completion_signal (u64)
DISPATCH_BODY = struct.Struct("<HHHHIIIIIQQQQ")
# hsa_barrier_and_packet_t after its first 4 bytes: reserved (u32), dep_signal[5] (u64), reserved (u64), completion_signal (u64)
BARRIER_BODY = struct.Struct("<I5QQQ")
SETUP_DIMS = 3   # setup bits 0-1: grid dimensions

def dispatch_body(grid: tuple[int, int, int], block: tuple[int, int, int], private: int, group: int, kernel_object: int,
                  kernarg: int, signal: int) -> bytes:
  """`grid` in work-items (HSA's convention, not work-groups)."""
  return DISPATCH_BODY.pack(*block, 0, *grid, private, group, kernel_object, kernarg, 0, signal)

def barrier_body(deps: list[int], signal: int) -> bytes:
  if len(deps) > 5: raise ValueError(f"a barrier-AND packet waits on at most 5 signals, got {len(deps)}")
  return BARRIER_BODY.pack(0, *(list(deps) + [0] * (5 - len(deps))), 0, signal)

# amd_signal_t (64 bytes, 64-aligned): kind i64, value i64, event_mailbox_ptr u64, event_id u32, reserved u32,
# start_ts u64, end_ts u64, queue_ptr u64, reserved u32 x2. The packet processor decrements `value` when a packet
# completes and, when event_mailbox_ptr is set, writes event_id there and raises the interrupt that wakes WAIT_EVENTS.
SIGNAL_SIZE, SIGNAL_KIND_USER = 64, 1
SIG_KIND, SIG_VALUE, SIG_MAILBOX, SIG_EVENT_ID, SIG_START_TS, SIG_END_TS = 0, 8, 16, 24, 32, 40
