//! Output files that appear whole or not at all: each is written to a temporary file in the
//! same folder and renamed over the target when complete, so an interrupted or failed write
//! never leaves a half file (nor a half-replaced previous one).

use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;

/// A file being written; [`AtomicFile::commit`] puts it in place. Dropped uncommitted (an error
/// on the way), its temporary is removed and the target is left as it was.
pub struct AtomicFile {
    target: PathBuf,
    tmp: PathBuf,
    w: Option<BufWriter<File>>,
}

impl AtomicFile {
    pub fn create(target: &Path) -> anyhow::Result<AtomicFile> {
        let dir = target.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let name = target.file_name().with_context(|| format!("{}: not a file path", target.display()))?;
        let tmp = dir.join(format!(".{}.tmp-{}", name.to_string_lossy(), std::process::id()));
        let f = File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        Ok(AtomicFile { target: target.to_path_buf(), tmp, w: Some(BufWriter::with_capacity(1 << 16, f)) })
    }

    /// Flushes, syncs and renames the file into place.
    pub fn commit(mut self) -> anyhow::Result<()> {
        let w = self.w.take().expect("not committed twice");
        let done = w
            .into_inner()
            .map_err(|e| e.into_error())
            .and_then(|f| f.sync_all())
            .and_then(|_| fs::rename(&self.tmp, &self.target));
        if done.is_err() {
            let _ = fs::remove_file(&self.tmp);
        }
        done.with_context(|| format!("writing {}", self.target.display()))
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.w.as_mut().expect("open until committed").write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.w.as_mut().expect("open until committed").flush()
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if self.w.take().is_some() {
            let _ = fs::remove_file(&self.tmp);
        }
    }
}

/// Writes `bytes` to `path` whole or not at all.
pub fn write(path: &Path, bytes: impl AsRef<[u8]>) -> anyhow::Result<()> {
    let mut f = AtomicFile::create(path)?;
    f.write_all(bytes.as_ref()).with_context(|| format!("writing {}", path.display()))?;
    f.commit()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_appears_whole_and_a_failed_one_leaves_the_old_and_no_temporary() {
        let dir = std::env::temp_dir().join(format!("servesim-atomic-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let p = dir.join("out.csv");
        write(&p, "old\n").unwrap();
        {
            // An error on the way: the writer is dropped before commit.
            let mut f = AtomicFile::create(&p).unwrap();
            f.write_all(b"half a li").unwrap();
        }
        assert_eq!(fs::read_to_string(&p).unwrap(), "old\n");
        write(&p, "new\n").unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "new\n");
        let names: Vec<String> =
            fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        assert_eq!(names, ["out.csv"]);
        // A target that is a folder: an error, nothing left behind.
        fs::create_dir_all(dir.join("sub")).unwrap();
        assert!(write(&dir.join("sub"), "x").is_err());
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 2);
        fs::remove_dir_all(&dir).unwrap();
    }
}
