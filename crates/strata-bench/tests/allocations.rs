//! No allocation per packet in steady state (ARCHITECTURE.md's performance
//! rules): once a ping-pong or a bulk transfer has warmed up — neighbours
//! resolved, pools and queues at their working size — moving more packets
//! allocates nothing, under every architecture. A global allocator counts
//! the allocations the test's own thread makes while a window is open.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use bytes::Bytes;
use strata::Arch;
use strata_bench::rtt::{MemPingPong, RttSetup};
use strata_bench::tcp_bulk::{BulkSetup, MemBulk};

/// Counts allocations (and reallocations that move or grow) of the thread
/// that opened a window.
struct Counting;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static COUNT: Cell<u64> = const { Cell::new(0) };
}

fn note() {
    // `try_with`: the thread's slots may be gone while it exits.
    if COUNTING.try_with(Cell::get).unwrap_or(false) {
        let _ = COUNT.try_with(|c| c.set(c.get() + 1));
    }
}

// SAFETY (the trait is unsafe to implement): every call is passed to the
// system allocator unchanged; counting touches only const-initialised
// thread-local cells, which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note();
        // SAFETY: the caller's contract for `alloc` is passed on as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note();
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` through this allocator.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note();
        // SAFETY: as for `dealloc`, with the caller's `realloc` contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Allocations `f` made on this thread.
fn allocations(f: impl FnOnce()) -> u64 {
    COUNT.with(|c| c.set(0));
    COUNTING.with(|c| c.set(true));
    f();
    COUNTING.with(|c| c.set(false));
    COUNT.with(Cell::get)
}

const STACKS: [(&str, Arch); 4] = [
    ("udp/ip/eth", Arch::Llm),
    ("udp/ip/eth", Arch::Illm),
    ("udp/ip/ethdaa", Arch::Daa),
    ("udp/ip/eth", Arch::Daa),
];

#[test]
fn a_udp_ping_pong_allocates_nothing_per_packet_under_every_architecture() {
    let mut failures = Vec::new();
    for (stack, arch) in STACKS {
        for checksum in [true, false] {
            for size in [1, 1400] {
                let mut pp = MemPingPong::new(&RttSetup {
                    stack: stack.into(),
                    arch,
                    checksum,
                })
                .unwrap();
                let payload = Bytes::from(vec![0x5a; size]);
                for _ in 0..500 {
                    pp.round_trip(&payload).unwrap();
                }
                let n = allocations(|| {
                    for _ in 0..1000 {
                        pp.round_trip(&payload).unwrap();
                    }
                });
                if n != 0 {
                    failures.push(format!(
                        "{stack} under {arch}, checksums {checksum}, {size} B: {n} allocations in 1000 round trips"
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_bulk_tcp_transfer_allocates_nothing_per_segment_under_every_architecture() {
    let mut failures = Vec::new();
    for arch in Arch::ALL {
        for offload in [false, true] {
            let setup = BulkSetup {
                tcp: "tcp",
                arch,
                buffer: Some(256 * 1024),
            };
            let mut bulk = MemBulk::new(&setup, 1500, offload).unwrap();
            // Engine time steps with the work, not the machine's load, so the
            // run repeats exactly.
            bulk.step_time(std::time::Duration::from_micros(20));
            // Pools and queues grow to their high-water mark first (the
            // segments in flight hold pooled segment lists).
            bulk.move_bytes(24_000_000).unwrap();
            let n = allocations(|| {
                bulk.move_bytes(8_000_000).unwrap();
            });
            let segments = 8_000_000 / 1448;
            if n != 0 {
                failures.push(format!(
                    "tcp/ip/eth under {arch}, offload {offload}: {n} allocations for {segments} segments"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
