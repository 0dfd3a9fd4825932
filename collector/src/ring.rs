//! Reading a BPF ring buffer in batches.
//!
//! The kernel side checks the consumer position on every reservation, and the
//! collector polls on the other core. A reader that publishes its position
//! after every record (as a general-purpose reader does, to free space as
//! early as possible) moves that cache line between the cores once per
//! record, and the job's syscalls pay for it. This reader takes the producer
//! position once, reads every record up to it, and publishes its own
//! position once per call (and at least every `PUBLISH_EVERY` bytes, so a
//! long batch still frees space as it goes).
//!
//! Layout (kernel/bpf/ringbuf.c): page 0 is the consumer position (mapped
//! read-write), page 1 the producer position, then the data pages, mapped
//! twice in a row so a record that wraps around the end reads as one slice.
//! Each record starts with an 8-byte header: its length, a busy bit while the
//! producer is still writing it, and a discard bit.

use std::os::fd::AsFd;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use aya::maps::MapData;
use rustix::mm::{self, MapFlags, ProtFlags};

use crate::error::{CollectError, CollectResult};

const BUSY_BIT: u32 = 1 << 31;
const DISCARD_BIT: u32 = 1 << 30;
const HEADER: usize = 8;
/// Consumed bytes after which the position is published even mid-batch.
const PUBLISH_EVERY: usize = 1 << 20;

pub struct Ring {
    _map: MapData,
    consumer: *mut AtomicUsize,
    producer: *const AtomicUsize,
    data: *const u8,
    mask: usize,
    consumer_len: usize,
    producer_len: usize,
}

// SAFETY: the mappings are owned by the value and only used through `&mut self`.
unsafe impl Send for Ring {}

impl Ring {
    pub fn new(map: MapData) -> CollectResult<Ring> {
        let info = map
            .info()
            .map_err(|e| CollectError::Kernel(format!("ring buffer info: {e}")))?;
        let size = info.max_entries() as usize;
        let page = rustix::param::page_size();
        if !size.is_power_of_two() || !size.is_multiple_of(page) {
            return Err(CollectError::Kernel(format!(
                "ring buffer of {size} bytes: not a power-of-two multiple of the page size"
            )));
        }
        let fd = map.fd().as_fd();
        let map_at = |len: usize, prot: ProtFlags, offset: usize| -> CollectResult<*mut u8> {
            // SAFETY: a shared mapping of the ring buffer map's own layout.
            let p = unsafe {
                mm::mmap(
                    std::ptr::null_mut(),
                    len,
                    prot,
                    MapFlags::SHARED,
                    fd,
                    offset as u64,
                )
            };
            p.map(|p| p.cast()).map_err(|e| {
                CollectError::Kernel(format!(
                    "mapping the ring buffer: {}",
                    std::io::Error::from(e)
                ))
            })
        };
        let consumer = map_at(page, ProtFlags::READ | ProtFlags::WRITE, 0)?;
        let producer_len = page + 2 * size;
        let producer = map_at(producer_len, ProtFlags::READ, page)?;
        Ok(Ring {
            _map: map,
            consumer: consumer.cast(),
            producer: producer.cast(),
            // SAFETY: the data pages follow the producer page in the mapping.
            data: unsafe { producer.add(page) },
            mask: size - 1,
            consumer_len: page,
            producer_len,
        })
    }

    /// Share of the ring written and not yet read, 0 to 1.
    pub fn fill(&self) -> f64 {
        // SAFETY: reads of the two positions the mappings hold.
        let (c, p) = unsafe {
            (
                (*self.consumer).load(Ordering::Relaxed),
                (*self.producer).load(Ordering::Relaxed),
            )
        };
        p.saturating_sub(c) as f64 / (self.mask + 1) as f64
    }

    /// Hands every committed record to `each`, in order; returns how many.
    pub fn drain(&mut self, mut each: impl FnMut(&[u8])) -> usize {
        // SAFETY: the mappings live as long as `self`; positions are the
        // kernel's, read and written with the orderings its protocol uses.
        unsafe {
            let consumer = &*self.consumer;
            let producer = &*self.producer;
            let mut pos = consumer.load(Ordering::Relaxed);
            let start = pos;
            let mut published = pos;
            let mut n = 0;
            // One pass up to where the producer is now: what arrives
            // meanwhile waits for the next call, so a call is bounded.
            let end = producer.load(Ordering::Acquire);
            while pos != end {
                let at = pos & self.mask;
                let header = &*(self.data.add(at) as *const AtomicU32);
                let h = header.load(Ordering::Acquire);
                if h & BUSY_BIT != 0 {
                    break; // still being written: it and the rest wait
                }
                let len = (h & !(BUSY_BIT | DISCARD_BIT)) as usize;
                if h & DISCARD_BIT == 0 {
                    each(std::slice::from_raw_parts(self.data.add(at + HEADER), len));
                    n += 1;
                }
                pos += (HEADER + len).next_multiple_of(8);
                if pos - published >= PUBLISH_EVERY {
                    consumer.store(pos, Ordering::Release);
                    published = pos;
                }
            }
            if pos != start {
                consumer.store(pos, Ordering::Release);
            }
            n
        }
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what `new` mapped.
        unsafe {
            let _ = mm::munmap(self.consumer.cast(), self.consumer_len);
            let _ = mm::munmap(self.producer.cast_mut().cast(), self.producer_len);
        }
    }
}
