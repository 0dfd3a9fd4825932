//! `#[repr(C)]` structs shared by the kernel-side programs and the collector.
#![no_std]
