//! Reading what users give: regular files, pipes, FIFOs, devices and `-` (standard input).
//!
//! Every input is read once: a text input (scenario, profile, measured run) whole, with a bound
//! on its size; a trace that is not a regular file is first copied ("spooled") into a temporary
//! file, since a trace is read twice (checked, then run) and a FIFO or pipe can be read only once.
//! Lines have a bound too, so `/dev/zero` as a trace is an error, not a line that grows forever.
//! Inputs are recorded so that no output of the run may be written over one
//! ([`crate::atomic::register_input`]).

use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use crate::error::{CliError, Result};

/// The largest text input read whole (scenario, profile, measured run, shard): 256 MiB.
pub(crate) const MAX_TEXT_BYTES: u64 = 256 << 20;

/// The longest line any reader accepts: 1 MiB.
pub(crate) const MAX_LINE_BYTES: u64 = 1 << 20;

/// Reads a text input whole: `-` is standard input. Errors name `what` and the path; a byte
/// order mark is dropped (CRLF line ends are accepted by every reader).
pub(crate) fn read_text(path: &Path, what: &str) -> Result<String> {
    let label = path.display();
    let mut bytes = Vec::new();
    let read = if path.as_os_str() == "-" {
        io::stdin().lock().take(MAX_TEXT_BYTES + 1).read_to_end(&mut bytes)
    } else {
        crate::atomic::register_input(path, what);
        File::open(path).and_then(|f| f.take(MAX_TEXT_BYTES + 1).read_to_end(&mut bytes))
    };
    read.map_err(|e| CliError::input(format!("cannot read {what} {label}: {e}")))?;
    if bytes.len() as u64 > MAX_TEXT_BYTES {
        return Err(CliError::input(format!(
            "{what} {label}: larger than {} MiB, the most read as one text file",
            MAX_TEXT_BYTES >> 20
        )));
    }
    let text = String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let line = e.as_bytes()[..at].iter().filter(|&&b| b == b'\n').count() + 1;
        CliError::input(format!("{what} {label}: line {line}: not UTF-8 text (byte {at})"))
    })?;
    Ok(match text.strip_prefix('\u{feff}') {
        Some(rest) => rest.to_string(),
        None => text,
    })
}

/// A reader that fails once a line runs past [`MAX_LINE_BYTES`] without a newline.
pub(crate) struct LineBound<R> {
    inner: R,
    since_newline: u64,
}

impl<R> LineBound<R> {
    pub(crate) fn new(inner: R) -> LineBound<R> {
        LineBound { inner, since_newline: 0 }
    }
}

impl<R: Read> Read for LineBound<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        match buf[..n].iter().rposition(|&b| b == b'\n') {
            Some(i) => self.since_newline = (n - i - 1) as u64,
            None => self.since_newline += n as u64,
        }
        if self.since_newline > MAX_LINE_BYTES {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a line longer than {} MiB: not a trace file", MAX_LINE_BYTES >> 20),
            ));
        }
        Ok(n)
    }
}

/// Where a trace can be read from twice: a regular file is itself; `-`, a FIFO, a pipe or a
/// device is copied once into a temporary file (removed when the command ends), looking at the
/// stop request (`--time-limit`, signals) between chunks.
pub(crate) fn rereadable(path: &Path, what: &str) -> Result<PathBuf> {
    let stdin = path.as_os_str() == "-";
    if !stdin {
        crate::atomic::register_input(path, what);
        let meta = std::fs::metadata(path)
            .map_err(|e| CliError::input(format!("{}: cannot read {what}: {e}", path.display())))?;
        if meta.is_file() {
            return Ok(path.to_path_buf());
        }
        if meta.is_dir() {
            return Err(CliError::input(format!("{}: a folder, not a {what} file", path.display())));
        }
    }
    let spool = std::env::temp_dir().join(format!(".servesim-spool-{}-{}", std::process::id(), spool_number()));
    crate::atomic::register_temporary(&spool);
    let mut src: Box<dyn Read> = if stdin {
        Box::new(io::stdin())
    } else {
        Box::new(File::open(path).map_err(|e| CliError::input(format!("{}: cannot read {what}: {e}", path.display())))?)
    };
    let mut src = LineBound::new(&mut src);
    let mut out = io::BufWriter::new(
        File::create(&spool).map_err(|e| CliError::Other(anyhow::anyhow!("creating {}: {e}", spool.display())))?,
    );
    let bad = |why: String| {
        CliError::input(format!("{}: {why}", if stdin { "standard input".into() } else { path.display().to_string() }))
    };
    let copy_err =
        |e: io::Error| CliError::Other(anyhow::anyhow!("copying {} to {}: {e}", path.display(), spool.display()));
    copy_checked(&mut src, &mut out, (what, SPOOL_MAX_BYTES), &bad, &copy_err)?;
    out.flush().map_err(copy_err)?;
    Ok(spool)
}

/// Copies a trace stream (`what` it is) into `out`, checking its lines as they come
/// ([`TraceLines`]), up to `limit` bytes; `bad` words what is wrong with the input, `copy_err`
/// a failed write.
fn copy_checked(
    src: &mut impl Read,
    out: &mut impl Write,
    (what, limit): (&str, u64),
    bad: &dyn Fn(String) -> CliError,
    copy_err: &dyn Fn(io::Error) -> CliError,
) -> Result<()> {
    let mut buf = vec![0u8; 1 << 20];
    let mut check = TraceLines::default();
    loop {
        crate::error::check_cancel()?;
        let n = match src.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(bad(format!("cannot read {what}: {e}"))),
        };
        // Checked as it comes, so that what is no trace (`/dev/urandom`, `yes`) is refused at
        // its first line, not after filling the temporary folder.
        check.feed(&buf[..n]).map_err(bad)?;
        if check.offset + check.carry.len() as u64 > limit {
            let size = if limit >= 1 << 30 { format!("{} GiB", limit >> 30) } else { format!("{} MiB", limit >> 20) };
            return Err(bad(format!(
                "more than {size}: a trace read from a stream is copied into the temporary folder up to {size}; \
                 give a longer one as a file"
            )));
        }
        out.write_all(&buf[..n]).map_err(copy_err)?;
    }
    check.finish().map_err(bad)
}

/// The most a trace read from a stream (`-`, a FIFO, a device) is copied into the temporary
/// folder.
const SPOOL_MAX_BYTES: u64 = 16 << 30;

/// The shape every trace format shares, checked on a stream as it is copied: UTF-8 text whose
/// first line is a CSV header (several fields, one with letters) or a JSON object, and whose other lines are
/// CSV rows (with commas), JSON objects or blank.
#[derive(Default)]
struct TraceLines {
    /// Lines completed so far.
    lines: u64,
    /// The line being read (at most its first 256 bytes, for the check and the message).
    head: Vec<u8>,
    /// Whether the line being read has a comma past what `head` holds.
    comma: bool,
    /// Bytes of an incomplete UTF-8 character at the end of the last chunk.
    carry: Vec<u8>,
    /// Bytes read, for the position of a UTF-8 error.
    offset: u64,
}

impl TraceLines {
    const HEAD: usize = 256;

    fn feed(&mut self, chunk: &[u8]) -> std::result::Result<(), String> {
        let mut joined;
        let bytes = if self.carry.is_empty() {
            chunk
        } else {
            joined = std::mem::take(&mut self.carry);
            joined.extend_from_slice(chunk);
            &joined[..]
        };
        let valid = match std::str::from_utf8(bytes) {
            Ok(_) => bytes.len(),
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(e) => {
                return Err(format!(
                    "line {}: not UTF-8 text (byte {}): not a trace",
                    self.lines + 1 + bytes[..e.valid_up_to()].iter().filter(|&&b| b == b'\n').count() as u64,
                    self.offset + e.valid_up_to() as u64
                ))
            }
        };
        for &b in &bytes[..valid] {
            if b == b'\n' {
                self.end_line()?;
            } else if self.head.len() < Self::HEAD {
                self.head.push(b);
            } else if b == b',' {
                self.comma = true;
            }
        }
        self.offset += valid as u64;
        self.carry = bytes[valid..].to_vec();
        Ok(())
    }

    fn end_line(&mut self) -> std::result::Result<(), String> {
        let text = String::from_utf8_lossy(&self.head);
        let line = text.trim_start_matches('\u{feff}').trim();
        let json = line.starts_with('{');
        let ok = if self.lines == 0 {
            json || (line.contains(',') && line.split(',').any(|f| f.trim().chars().any(|c| c.is_alphabetic())))
        } else {
            line.is_empty() || json || self.comma || line.contains(',')
        };
        self.lines += 1;
        if !ok {
            let shown: String = line.chars().take(60).collect();
            return Err(if self.lines == 1 {
                format!("line 1: {shown:?} is neither a CSV header (column names) nor a JSON object: not a trace")
            } else {
                format!("line {}: {shown:?} is neither a CSV row nor a JSON object: not a trace", self.lines)
            });
        }
        self.head.clear();
        self.comma = false;
        Ok(())
    }

    fn finish(&mut self) -> std::result::Result<(), String> {
        if !self.carry.is_empty() {
            return Err(format!("byte {}: the text ends inside a UTF-8 character: not a trace", self.offset));
        }
        if !self.head.is_empty() {
            self.end_line()?;
        }
        Ok(())
    }
}

fn spool_number() -> u64 {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// Reads and parses a cost profile; errors name the file.
pub(crate) fn load_profile(
    path: &Path,
) -> std::result::Result<servesim_sim::cost::profile::Profile, servesim_sim::scenario::ResourceError> {
    use servesim_sim::scenario::ResourceError;
    let text = read_text(path, "profile").map_err(|e| ResourceError::File(e.to_string()))?;
    servesim_sim::cost::profile::Profile::from_json(&text)
        .map_err(|e| ResourceError::File(format!("{}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream past the spool's bound is refused naming the bound, with no more than the
    /// bound copied (the same code at 16 GiB; here at 1 MiB); one within it is copied whole.
    #[test]
    fn a_stream_past_the_spool_bound_is_refused_naming_it() {
        let trace = format!("arrival_s,prompt_tokens,output_tokens\n{}", "0.5,100,10\n".repeat(300_000));
        let bad = |why: String| CliError::input(why);
        let copy_err = |e: io::Error| CliError::Other(e.into());
        let mut out = Vec::new();
        let e =
            copy_checked(&mut trace.as_bytes(), &mut out, ("trace", 1 << 20), &bad, &copy_err).unwrap_err().to_string();
        assert!(
            e.contains("more than 1 MiB: a trace read from a stream is copied into the temporary folder up to 1 MiB"),
            "{e}"
        );
        assert!(out.len() <= 1 << 20, "{} bytes copied", out.len());
        let mut out = Vec::new();
        copy_checked(&mut trace.as_bytes(), &mut out, ("trace", 8 << 20), &bad, &copy_err).unwrap();
        assert_eq!(out, trace.as_bytes());
    }

    #[test]
    fn a_line_past_the_bound_is_an_error_and_newlines_reset_it() {
        let long = vec![b'0'; (MAX_LINE_BYTES + 10) as usize];
        let mut s = String::new();
        let e = LineBound::new(&long[..]).read_to_string(&mut s).unwrap_err();
        assert!(e.to_string().contains("a line longer than 1 MiB"), "{e}");
        // Many short lines adding up to more than the bound are fine.
        let lines = "12345\n".repeat((MAX_LINE_BYTES / 3) as usize);
        let mut s = String::new();
        LineBound::new(lines.as_bytes()).read_to_string(&mut s).unwrap();
        assert_eq!(s.len(), lines.len());
    }

    #[test]
    fn a_streamed_trace_is_refused_at_its_first_line_that_no_trace_has() {
        let check = |chunks: &[&[u8]]| {
            let mut c = TraceLines::default();
            for ch in chunks {
                c.feed(ch)?;
            }
            c.finish()
        };
        // CSV and JSONL, a BOM, CRLF, a blank line, a character split across chunks.
        assert_eq!(check(&[b"\xef\xbb\xbfarrival_s,prompt_tokens,output_tokens\r\n0,1", b"00,10\r\n\n"]), Ok(()));
        assert_eq!(check(&["{\"a\": \"\u{e9}\"}\n".as_bytes()]), Ok(()));
        let e = "{\"a\": \"\u{e9}\"}\n".as_bytes();
        assert_eq!(check(&[&e[..9], &e[9..]]), Ok(()));
        // `yes` and `yes 0,100,10`: refused at line 1, a header without names is no header.
        assert!(check(&[b"y\ny\n"]).unwrap_err().starts_with("line 1: \"y\" is neither a CSV header"));
        assert!(check(&[b"0,100,10\n"]).unwrap_err().starts_with("line 1: \"0,100,10\""));
        // A later line that is no row.
        assert!(check(&[b"a,b,c\n1,2,3\nhello\n"]).unwrap_err().starts_with("line 3: \"hello\""));
        // Bytes that are no text, with their position.
        assert_eq!(check(&[b"a,b\n\xff\xfe"]).unwrap_err(), "line 2: not UTF-8 text (byte 4): not a trace");
        assert!(check(&[b"a,b\n1,\xc3"]).unwrap_err().contains("ends inside a UTF-8 character"));
    }

    #[test]
    fn text_inputs_drop_a_bom_and_name_the_line_of_bad_utf8() {
        let dir = std::env::temp_dir().join(format!("servesim-input-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("s.toml");
        std::fs::write(&p, "\u{feff}a = 1\r\n").unwrap();
        assert_eq!(read_text(&p, "scenario").unwrap(), "a = 1\r\n");
        std::fs::write(&p, b"a = 1\nb = \"\xff\"\n").unwrap();
        let e = read_text(&p, "scenario").unwrap_err().to_string();
        assert!(e.ends_with("s.toml: line 2: not UTF-8 text (byte 11)"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
