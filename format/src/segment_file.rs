//! Defences of the reader against hostile segment files, found by fuzzing:
//! a file view that makes reading past the end an error ([`SegmentFile`]),
//! and a guard that turns a panic inside the Parquet decoder into a
//! one-line error naming the file ([`guard`]).

use std::cell::Cell;
use std::fs::File;
use std::io::Read;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::Once;

use bytes::Bytes;
use parquet::errors::ParquetError;
use parquet::file::reader::{ChunkReader, Length};

use crate::error::{TraceError, TraceResult};

/// A segment file as the Parquet decoder sees it, stricter than `File` about
/// its end: reading past the end is an error rather than an empty read (the
/// decoder's Thrift skipping otherwise spins for minutes on a corrupt page
/// header that claims a list of 2^31 elements), and a byte range past the end
/// is refused before a buffer of its claimed size is allocated.
pub struct SegmentFile {
    file: File,
    len: u64,
}

impl SegmentFile {
    pub fn open(path: &Path) -> TraceResult<Self> {
        let file = File::open(path).map_err(|e| TraceError::io(path, e))?;
        let len = file.metadata().map_err(|e| TraceError::io(path, e))?.len();
        Ok(SegmentFile { file, len })
    }
}

impl Length for SegmentFile {
    fn len(&self) -> u64 {
        self.len
    }
}

impl ChunkReader for SegmentFile {
    type T = EndIsError<<File as ChunkReader>::T>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        Ok(EndIsError(self.file.get_read(start)?))
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        match start.checked_add(length as u64) {
            Some(end) if end <= self.len => self.file.get_bytes(start, length),
            _ => Err(ParquetError::EOF(format!(
                "{length} bytes at offset {start} reach past the end of the file ({} bytes)",
                self.len
            ))),
        }
    }
}

/// A segment file mapped into memory, for a scan that reads most of it:
/// the decoder takes its pages straight from the page cache, with no read
/// call, copy or buffer per page. The same defences as [`SegmentFile`]: a
/// range past the end is refused, and reading past it is an error.
///
/// A file cut shorter while it is mapped would stop the process (SIGBUS);
/// segments are written whole under a temporary name and renamed, and never
/// changed afterwards, so only a file changed by hand could.
pub struct MappedSegment {
    bytes: Bytes,
}

/// The mapping, unmapped when the last page handed out is dropped.
struct Mapping {
    at: *mut libc::c_void,
    len: usize,
}

// SAFETY: the mapping is read-only and private; it is only read, from any thread.
unsafe impl Send for Mapping {}
unsafe impl Sync for Mapping {}

impl AsRef<[u8]> for Mapping {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `at` maps `len` readable bytes until `drop`.
        unsafe { std::slice::from_raw_parts(self.at as *const u8, self.len) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `at` and `len` are those `mmap` returned.
        unsafe { libc::munmap(self.at, self.len) };
    }
}

impl MappedSegment {
    pub fn open(path: &Path) -> TraceResult<Self> {
        use std::os::fd::AsRawFd;
        let file = File::open(path).map_err(|e| TraceError::io(path, e))?;
        let len = file.metadata().map_err(|e| TraceError::io(path, e))?.len() as usize;
        if len == 0 {
            return Ok(MappedSegment {
                bytes: Bytes::new(),
            });
        }
        // SAFETY: a fresh private read-only mapping of an open file.
        let at = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                file.as_raw_fd(),
                0,
            )
        };
        if at == libc::MAP_FAILED {
            return Err(TraceError::io(path, std::io::Error::last_os_error()));
        }
        Ok(MappedSegment {
            bytes: Bytes::from_owner(Mapping { at, len }),
        })
    }
}

impl Length for MappedSegment {
    fn len(&self) -> u64 {
        self.bytes.len() as u64
    }
}

impl ChunkReader for MappedSegment {
    type T = EndIsError<bytes::buf::Reader<Bytes>>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        use bytes::Buf;
        let start = (start as usize).min(self.bytes.len());
        Ok(EndIsError(self.bytes.slice(start..).reader()))
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        match start.checked_add(length as u64) {
            Some(end) if end <= self.bytes.len() as u64 => {
                Ok(self.bytes.slice(start as usize..end as usize))
            }
            _ => Err(ParquetError::EOF(format!(
                "{length} bytes at offset {start} reach past the end of the file ({} bytes)",
                self.bytes.len()
            ))),
        }
    }
}

/// A reader whose end is an `UnexpectedEof` error.
pub struct EndIsError<R>(R);

impl<R: Read> Read for EndIsError<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.0.read(buf)?;
        if n == 0 && !buf.is_empty() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "read past the end of the file",
            ));
        }
        Ok(n)
    }
}

// A panic inside the Parquet/Arrow decoder becomes a [`TraceError`].
//
// Some corrupt segments (found by fuzzing the reader) make the decoder panic
// on an internal bounds check rather than return an error, and no cheap check
// beforehand can tell. The reader therefore runs each decoder call through
// [`guard`]: a panic there becomes "corrupt segment" naming the file, and the
// panic message is kept off stderr so a CLI still prints one line. Panics
// anywhere else reach the previous panic hook unchanged.
thread_local! {
    /// Whether this thread is inside [`guard`], whose panics are reported as errors.
    static GUARDED: Cell<bool> = const { Cell::new(false) };
}

static QUIET_HOOK: Once = Once::new();

/// Installs, once per process, a hook that stays silent for guarded panics and
/// hands every other panic to the hook that was there before.
fn install_quiet_hook() {
    QUIET_HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !GUARDED.with(Cell::get) {
                previous(info);
            }
        }));
    });
}

/// Runs one decoder call on the segment at `path`; a panic in it becomes
/// `TraceError::Parquet` with "corrupt segment" and the panic's message.
pub fn guard<T>(path: &Path, decode: impl FnOnce() -> TraceResult<T>) -> TraceResult<T> {
    install_quiet_hook();
    let outer = GUARDED.with(|g| g.replace(true));
    let result = catch_unwind(AssertUnwindSafe(decode));
    GUARDED.with(|g| g.set(outer));
    result.unwrap_or_else(|payload| {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        Err(TraceError::parquet(
            path,
            format!("corrupt segment: the decoder failed: {message}"),
        ))
    })
}
