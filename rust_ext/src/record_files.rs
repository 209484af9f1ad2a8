//! The disk work of run records, many files at a time with the interpreter lock released once.
//!
//! The record writer's thread appends to three files of every busy run in each batch and replaces
//! their meta.json; starting a run writes two files. Done from Python, each open, fstat, write,
//! close and rename released and took back the interpreter lock: a hand-off each, which with
//! hundreds of threads waiting for the lock cost more than the writes. Here a whole batch is one
//! hand-off. The rules (whole lines only, bytes written by someone else cut off and reported, a
//! file replaced through a temporary sibling) are `lev_nb.store.files`'s; this is the part that
//! touches the disk.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;

use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// One file's outcome: its size after the append (-1: unknown, it could not be opened), what
/// someone else did to it since `expected` (positive: that many bytes they appended were cut off;
/// negative: they cut that many bytes), and the errno of a failure (0: none; the file then keeps
/// its size before the append).
type Outcome = (i64, i64, i32);

fn append_one(path: &str, data: &[u8], expected: Option<u64>) -> Outcome {
    let errno = |e: std::io::Error| e.raw_os_error().unwrap_or(libc::EIO);
    let file = match OpenOptions::new().append(true).create(true).mode(0o600).open(path) {
        Ok(file) => file,
        Err(e) => return (-1, 0, errno(e)),
    };
    let mut size = match file.metadata() {
        Ok(meta) => meta.len(),
        Err(e) => return (-1, 0, errno(e)),
    };
    let mut foreign: i64 = 0;
    if let Some(expected) = expected {
        if size > expected {
            if let Err(e) = file.set_len(expected) {
                return (size as i64, 0, errno(e));
            }
            foreign = (size - expected) as i64;
            size = expected;
        } else if size < expected {
            foreign = -((expected - size) as i64);
        }
    }
    let mut writer = &file;
    if let Err(e) = writer.write_all(data) {
        let _ = file.set_len(size); // a part-written line is undone: the file keeps whole lines
        return (size as i64, foreign, errno(e));
    }
    ((size + data.len() as u64) as i64, foreign, 0)
}

/// Append `data` to each `path` (created owner-only when missing), in order, with the interpreter
/// lock released for the whole batch. `expected`: the size the file had after the caller's last
/// append (None: not known). Returns an `Outcome` per file.
#[pyfunction]
pub fn append_batch(py: Python<'_>, appends: Vec<(String, Bound<'_, PyBytes>, Option<u64>)>) -> Vec<Outcome> {
    // Copied out while the lock is held: the bytes objects must not be read without it.
    let owned: Vec<(String, Vec<u8>, Option<u64>)> =
        appends.into_iter().map(|(path, data, expected)| (path, data.as_bytes().to_vec(), expected)).collect();
    py.detach(move || owned.iter().map(|(path, data, expected)| append_one(path, data, *expected)).collect())
}

/// Swap the contents of `tmp` and `path` in one atomic step (Linux's `RENAME_EXCHANGE`). Ok(false)
/// when the swap cannot be made here (`path` does not exist yet, or the file system or the system
/// does not support it): the caller then renames as usual.
#[cfg(target_os = "linux")]
fn exchange(tmp: &str, path: &str) -> std::io::Result<bool> {
    use std::ffi::CString;
    let (Ok(from), Ok(to)) = (CString::new(tmp), CString::new(path)) else {
        return Ok(false); // a NUL in a path: the plain rename reports it
    };
    // SAFETY: two valid C strings, relative to the current directory (the paths are absolute).
    let done = unsafe {
        libc::renameat2(libc::AT_FDCWD, from.as_ptr(), libc::AT_FDCWD, to.as_ptr(), libc::RENAME_EXCHANGE)
    };
    if done == 0 {
        return Ok(true);
    }
    let error = std::io::Error::last_os_error();
    match error.raw_os_error() {
        Some(libc::ENOENT | libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP | libc::EXDEV) => Ok(false),
        _ => Err(error),
    }
}

#[cfg(not(target_os = "linux"))]
fn exchange(_tmp: &str, _path: &str) -> std::io::Result<bool> {
    Ok(false)
}

fn replace_one(path: &str, tmp: &str, data: &[u8], durable: bool, keep_sibling: bool) -> i32 {
    let errno = |e: std::io::Error| e.raw_os_error().unwrap_or(libc::EIO);
    let written = (|| -> std::io::Result<()> {
        // O_NOFOLLOW: the sibling is ours; a link planted in its place is refused, not written through.
        // Written over, then cut to length: a kept sibling's blocks are reused, not freed and
        // allocated again as truncating first would.
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(tmp)?;
        file.write_all(data)?;
        file.set_len(data.len() as u64)?;
        if durable {
            file.sync_all()?;
        }
        drop(file);
        if keep_sibling && exchange(tmp, path)? {
            // The sibling now holds the previous content and is written over next time: no inode
            // is allocated or freed per write. A durable write is a run's last (or a pause): the
            // sibling goes, so a finished record has no leftover file.
            if durable {
                let _ = fs::remove_file(tmp);
            }
            return Ok(());
        }
        fs::rename(tmp, path)
    })();
    match written {
        Ok(()) => 0,
        Err(e) => {
            let _ = fs::remove_file(tmp);
            errno(e)
        }
    }
}

/// Replace each `path` whole with `data`: written to `tmp` (created owner-only), fsynced when
/// `durable`, then put in `path`'s place in one step, so a reader sees the old or the new content,
/// never a mix. With `keep_sibling` (a run record's meta.json, replaced on every turn) the two
/// files' contents are swapped where the system can (see `exchange`) and `tmp` is kept for the next
/// write: renaming over the file freed an inode and allocated one on every write, and with hundreds
/// of runs the file system's search for a free inode cost more processor time than the writes.
/// Otherwise `tmp` is renamed over `path`. The interpreter lock is released for the whole batch;
/// returns each file's errno (0: replaced; on a failure `tmp` is removed and `path` keeps what it had).
#[pyfunction]
pub fn replace_batch(py: Python<'_>, files: Vec<(String, String, Bound<'_, PyBytes>, bool, bool)>) -> Vec<i32> {
    let owned: Vec<(String, String, Vec<u8>, bool, bool)> = files
        .into_iter()
        .map(|(path, tmp, data, durable, keep)| (path, tmp, data.as_bytes().to_vec(), durable, keep))
        .collect();
    py.detach(move || {
        owned.iter().map(|(path, tmp, data, durable, keep)| replace_one(path, tmp, data, *durable, *keep)).collect()
    })
}
