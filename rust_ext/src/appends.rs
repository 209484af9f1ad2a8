//! Appending whole lines to many run-record files with the interpreter lock released once.
//!
//! The record writer's thread appends to three files of every busy run in each batch. Done from
//! Python, each open, fstat, write and close released and took back the interpreter lock: four
//! hand-offs a file, which with hundreds of threads waiting for the lock cost more than the
//! writes. Here a whole batch is one hand-off. The rules (whole lines only, bytes written by
//! someone else cut off and reported) are `lev_nb.store.files.append_batch`'s; this is the part
//! that touches the disk.

use std::fs::OpenOptions;
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
