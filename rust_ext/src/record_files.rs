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

fn replace_one(path: &str, tmp: &str, data: &[u8], durable: bool) -> i32 {
    let errno = |e: std::io::Error| e.raw_os_error().unwrap_or(libc::EIO);
    let written = (|| -> std::io::Result<()> {
        let mut file = OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(tmp)?;
        file.write_all(data)?;
        if durable {
            file.sync_all()?;
        }
        drop(file);
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
/// `durable`, then renamed over `path`, so a reader sees the old or the new content, never a mix.
/// The interpreter lock is released for the whole batch; returns each file's errno (0: replaced;
/// on a failure `tmp` is removed and `path` keeps what it had).
#[pyfunction]
pub fn replace_batch(py: Python<'_>, files: Vec<(String, String, Bound<'_, PyBytes>, bool)>) -> Vec<i32> {
    let owned: Vec<(String, String, Vec<u8>, bool)> =
        files.into_iter().map(|(path, tmp, data, durable)| (path, tmp, data.as_bytes().to_vec(), durable)).collect();
    py.detach(move || owned.iter().map(|(path, tmp, data, durable)| replace_one(path, tmp, data, *durable)).collect())
}
