//! A global allocator that makes huge allocations lazy.
//!
//! Why: the `kafka-protocol` decoder (0.18) reserves `Vec::with_capacity(n)` for an array
//! whose element count `n` it read off the wire, before checking that the bytes for `n`
//! elements are present. A request of a few bytes can thus ask for hundreds of gigabytes; the
//! system allocator refuses, and Rust aborts the process — one malformed frame would take the
//! broker down. With this allocator, any allocation of at least [`LAZY_ALLOCATION_BYTES_MIN`]
//! is an anonymous `MAP_NORESERVE` mapping: address space only, with no memory committed
//! until it is touched. The decoder then fails on the missing bytes, the vector is dropped
//! untouched, and the connection is closed with a log line. Ordinary allocations are the
//! system allocator's.
//!
//! It is installed by the `weir` binary (and by tests that send hostile frames). Under
//! `vm.overcommit_memory=2` the kernel refuses such mappings too, and the guard does not help.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};

/// Allocations at least this large are lazy mappings.
pub const LAZY_ALLOCATION_BYTES_MIN: usize = 1 << 30;
/// Mappings are page-aligned; larger alignments go to the system allocator.
const PAGE_BYTES: usize = 4096;

/// The allocator; see the module documentation.
pub struct LazyHugeAlloc;

fn is_lazy(layout: Layout) -> bool {
    layout.size() >= LAZY_ALLOCATION_BYTES_MIN && layout.align() <= PAGE_BYTES
}

// SAFETY: every pointer handed out is either from `System` (and returned to it) or from a
// fresh private anonymous mapping of exactly `layout.size()` bytes (page-aligned, hence aligned
// for `layout`, zero-filled, and unmapped with the same size); `is_lazy` depends only on the
// layout, which callers must pass unchanged to `dealloc`, so each pointer goes back where it
// came from.
unsafe impl GlobalAlloc for LazyHugeAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if is_lazy(layout) {
            map(layout.size())
        } else {
            // SAFETY: forwarded with the caller's guarantees.
            unsafe { System.alloc(layout) }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if is_lazy(layout) {
            // Anonymous mappings are zero-filled.
            map(layout.size())
        } else {
            // SAFETY: forwarded with the caller's guarantees.
            unsafe { System.alloc_zeroed(layout) }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if is_lazy(layout) {
            // SAFETY: `ptr` came from `map(layout.size())` (see the impl's safety comment).
            unsafe {
                libc::munmap(ptr.cast(), layout.size());
            }
        } else {
            // SAFETY: `ptr` came from `System` with this layout.
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let Ok(new_layout) = Layout::from_size_align(new_size, layout.align()) else {
            return std::ptr::null_mut();
        };
        if !is_lazy(layout) && !is_lazy(new_layout) {
            // SAFETY: forwarded with the caller's guarantees.
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        // SAFETY: moving between the two kinds of memory: allocate, copy the overlap, free.
        unsafe {
            let fresh = self.alloc(new_layout);
            if !fresh.is_null() {
                std::ptr::copy_nonoverlapping(ptr, fresh, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
            fresh
        }
    }
}

fn map(size: usize) -> *mut u8 {
    // SAFETY: a private anonymous mapping with no fixed address touches no existing memory.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if ptr == libc::MAP_FAILED { std::ptr::null_mut() } else { ptr.cast() }
}

/// Blocks up to this size come from the C allocator's heaps, to be reused once freed.
pub const HEAP_BLOCK_BYTES_MAX: usize = 8 << 20;
/// Free memory at the top of a heap that the C allocator keeps rather than hands back.
pub const HEAP_KEEP_BYTES: usize = 16 << 20;

/// Tunes glibc's allocator for a broker's I/O buffers. A fetch reads up to a MiB per partition
/// into a fresh buffer and a produce request arrives in one, many times a second. By default
/// glibc maps each block over 128 KiB afresh (until the first free raises that limit) and hands
/// the top of its heaps back eagerly, so every such buffer was new memory: a page fault and a
/// zeroed page per 4 KiB, which cost more than the read itself (and far more on a virtual
/// machine whose host has taken the memory back). With these limits freed buffers are reused;
/// what a heap may keep is bounded by [`HEAP_KEEP_BYTES`].
pub fn keep_freed_buffers() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let (block, keep) = (to_int(HEAP_BLOCK_BYTES_MAX), to_int(HEAP_KEEP_BYTES));
        // SAFETY: `mallopt` only sets allocator parameters (under the allocator's own lock);
        // both values are within the ranges glibc accepts.
        let set = unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, block) == 1
                && libc::mallopt(libc::M_TRIM_THRESHOLD, keep) == 1
        };
        if !set {
            tracing::warn!("the C allocator refused its buffer settings; large buffers stay fresh");
        }
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn to_int(bytes: usize) -> libc::c_int {
    libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX)
}
