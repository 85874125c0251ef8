//! Output files that appear whole or not at all: each is written to a temporary file in the
//! same folder and renamed over the target when complete, so an interrupted or failed write
//! never leaves a half file (nor a half-replaced previous one).
//!
//! The process also keeps an exclusive lock on each output folder it writes into (held until it
//! ends), so a second run writing into the same folder at once is refused instead of mixing its
//! files with this one's (shards of one sweep wait for it instead: [`wait_for_folder_locks`]);
//! and it refuses to write over one of its own inputs (the scenario, a
//! trace, a profile) or over an output it already wrote.
//!
//! What is not a regular file is never replaced: a device, a FIFO or a socket (`/dev/null`, a
//! named pipe) is written through, as is an open file of this process named as one
//! (`/dev/stdout`, `/dev/stderr`, `/dev/fd/N`: written at its current offset, as a shell
//! redirection would); a symbolic link is followed, as `cp` and `tee` do — its target is written
//! (whole, by the rename) and the link stays — and one that points nowhere is refused.

use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use std::sync::Mutex;

use anyhow::{bail, Context};

/// What this process has opened, written and locked.
#[derive(Default)]
struct Registry {
    /// Canonical paths of the inputs, with what each is ("scenario", "trace", ...).
    inputs: Vec<(PathBuf, String)>,
    /// Canonical paths of the outputs written.
    written: Vec<PathBuf>,
    /// Output folders locked, with the open handle that holds the lock.
    locks: Vec<(PathBuf, File)>,
    /// Temporaries to remove if the process is ended before they are.
    temps: Vec<PathBuf>,
}

static REGISTRY: Mutex<Registry> =
    Mutex::new(Registry { inputs: Vec::new(), written: Vec::new(), locks: Vec::new(), temps: Vec::new() });

fn registry() -> std::sync::MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

/// Records `path` as an input of this run (`what`: "scenario", "trace", ...): no output may be
/// written over it.
pub(crate) fn register_input(path: &Path, what: &str) {
    if let Ok(c) = fs::canonicalize(path) {
        registry().inputs.push((c, what.to_string()));
    }
}

/// Records a temporary file to remove when the command ends ([`remove_temporaries`]).
pub(crate) fn register_temporary(path: &Path) {
    registry().temps.push(path.to_path_buf());
}

fn forget_temporary(path: &Path) {
    registry().temps.retain(|p| p != path);
}

/// Removes the temporaries still registered (the process is about to end).
pub(crate) fn remove_temporaries() {
    for p in std::mem::take(&mut registry().temps) {
        // A staging folder of [`exchange_folder`] or a temporary file.
        let _ = fs::remove_dir_all(&p).or_else(|_| fs::remove_file(&p));
    }
}

/// An output refused because of what the user asked (it would replace an input or another
/// output, or its folder is in use): the CLI reports it as bad input, exit code 2.
#[derive(Debug)]
pub(crate) struct Refused(pub String);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

fn refuse(msg: String) -> anyhow::Error {
    anyhow::Error::new(Refused(msg))
}

/// Whether folder locks are waited for (shards of one sweep) instead of refused when held.
static WAIT_FOR_LOCKS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Makes this process wait for an output folder another process holds, rather than refuse it:
/// for `--shard` runs, whose siblings write their own files into the same folder at once. Each
/// holds the folder from its first output to its end, so their writes come one after another.
pub(crate) fn wait_for_folder_locks() {
    WAIT_FOR_LOCKS.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Checks that `target` (in folder `dir`) may be written by this process and locks `dir`.
fn claim(dir: &Path, name: &std::ffi::OsStr) -> anyhow::Result<()> {
    let dir_c = fs::canonicalize(dir).with_context(|| format!("output folder {}", dir.display()))?;
    let target_c = dir_c.join(name);
    let mut reg = registry();
    if let Some((_, what)) = reg.inputs.iter().find(|(p, _)| *p == target_c) {
        return Err(refuse(format!(
            "refusing to write {}: it is this run's {what}; choose another output path",
            target_c.display()
        )));
    }
    if reg.written.contains(&target_c) {
        return Err(refuse(format!(
            "refusing to write {} twice: two of this run's outputs name the same file; choose another path",
            target_c.display()
        )));
    }
    while !reg.locks.iter().any(|(d, _)| *d == dir_c) {
        let f = File::open(&dir_c).with_context(|| format!("opening output folder {}", dir_c.display()))?;
        let locked = if WAIT_FOR_LOCKS.load(std::sync::atomic::Ordering::Relaxed) {
            // A shard: its siblings write their own files here; wait for the one writing now.
            f.lock().map_err(fs::TryLockError::Error)
        } else {
            f.try_lock()
        };
        match locked {
            // The folder this handle locked may have been exchanged for a new one while this
            // process waited ([`exchange_folder`]): lock the one the path names now.
            Ok(()) if !same_file(&f, &dir_c) => continue,
            Ok(()) => reg.locks.push((dir_c.clone(), f)),
            Err(fs::TryLockError::WouldBlock) => {
                return Err(refuse(format!(
                    "output folder {} is in use by another servesim run; wait for it to end or choose another --out",
                    dir_c.display()
                )))
            }
            Err(fs::TryLockError::Error(e)) => {
                // A file system without locks (some network mounts): go on without one.
                if e.kind() != std::io::ErrorKind::Unsupported {
                    bail!("locking output folder {}: {e}", dir_c.display());
                }
                break;
            }
        }
    }
    Ok(())
}

/// Whether the open `f` is the file `path` names now.
fn same_file(f: &File, path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        match (f.metadata(), fs::metadata(path)) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (f, path);
        true
    }
}

/// A file being written; [`AtomicFile::commit`] puts it in place. Dropped uncommitted (an error
/// on the way), its temporary is removed and the target is left as it was. A target that is not
/// a regular file is written through (`tmp` is `None`): there is nothing to rename.
pub(crate) struct AtomicFile {
    target: PathBuf,
    tmp: Option<PathBuf>,
    w: Option<BufWriter<File>>,
}

/// The file descriptor a path names when it is one of this process's open files
/// (`/dev/stdout`, `/dev/stderr`, `/dev/fd/N`, `/proc/self/fd/N`).
fn own_descriptor(path: &Path) -> Option<i32> {
    let p = path.to_str()?;
    match p {
        "/dev/stdout" => Some(1),
        "/dev/stderr" => Some(2),
        _ => p.strip_prefix("/dev/fd/").or_else(|| p.strip_prefix("/proc/self/fd/"))?.parse().ok(),
    }
}

/// Where an output named `target` goes: written through (an open file of this process, a device,
/// a FIFO, a socket), or replaced whole at a regular path (a symbolic link's target, followed).
enum Destination {
    Through(File),
    Replace(PathBuf),
}

fn destination(target: &Path) -> anyhow::Result<Destination> {
    #[cfg(unix)]
    if let Some(fd) = own_descriptor(target) {
        use std::os::fd::FromRawFd;
        // SAFETY: dup(2) of a descriptor number; the result is checked before use and owned by
        // the new File alone.
        let dup = unsafe { libc::dup(fd) };
        if dup < 0 {
            bail!("writing {}: file descriptor {fd} is not open", target.display());
        }
        // SAFETY: `dup` is a fresh descriptor nobody else owns.
        return Ok(Destination::Through(unsafe { File::from_raw_fd(dup) }));
    }
    let link = fs::symlink_metadata(target).ok();
    match fs::metadata(target) {
        Ok(m) if !m.is_file() && !m.is_dir() => {
            let f = fs::OpenOptions::new().write(true).open(target).with_context(|| format!("opening {}", target.display()))?;
            Ok(Destination::Through(f))
        }
        Ok(_) if link.as_ref().is_some_and(|l| l.file_type().is_symlink()) => {
            Ok(Destination::Replace(fs::canonicalize(target).with_context(|| format!("following {}", target.display()))?))
        }
        Err(_) if link.as_ref().is_some_and(|l| l.file_type().is_symlink()) => Err(refuse(format!(
            "refusing to write {}: it is a symbolic link to {}, which does not exist; remove the link or name its target",
            target.display(),
            fs::read_link(target).map(|p| p.display().to_string()).unwrap_or_else(|_| "?".into())
        ))),
        _ => Ok(Destination::Replace(target.to_path_buf())),
    }
}

impl AtomicFile {
    pub(crate) fn create(target: &Path) -> anyhow::Result<AtomicFile> {
        let target = match destination(target)? {
            Destination::Through(f) => {
                return Ok(AtomicFile {
                    target: target.to_path_buf(),
                    tmp: None,
                    w: Some(BufWriter::with_capacity(1 << 16, f)),
                })
            }
            Destination::Replace(t) => t,
        };
        let dir = target.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let name = target.file_name().with_context(|| format!("{}: not a file path", target.display()))?;
        claim(dir, name)?;
        let tmp = dir.join(format!(".{}.tmp-{}", name.to_string_lossy(), std::process::id()));
        let f = File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        register_temporary(&tmp);
        Ok(AtomicFile { target, tmp: Some(tmp), w: Some(BufWriter::with_capacity(1 << 16, f)) })
    }

    /// Flushes, syncs and renames the file into place.
    pub(crate) fn commit(self) -> anyhow::Result<()> {
        commit_all([self])
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
        if let (Some(_), Some(tmp)) = (self.w.take(), &self.tmp) {
            let _ = fs::remove_file(tmp);
            forget_temporary(tmp);
        }
    }
}

/// Flushes and syncs every file, then puts them all in place: the slow part (writing, syncing)
/// is done before any target changes. Files of one folder are put in place together by
/// exchanging the folder ([`exchange_folder`]) where the file system can, so a process killed at
/// any point leaves the previous files or the new ones; elsewhere they are renamed one after
/// another, and a process killed within those renames can leave some of each.
pub(crate) fn commit_all<const N: usize>(files: [AtomicFile; N]) -> anyhow::Result<()> {
    let mut ready = Vec::with_capacity(N);
    for mut f in files {
        let w = f.w.take().expect("not committed twice");
        let Some(tmp) = f.tmp.clone() else {
            // Written through: flushed, nothing to sync (a pipe or a device cannot be) or rename.
            w.into_inner().map_err(|e| e.into_error()).with_context(|| format!("writing {}", f.target.display()))?;
            continue;
        };
        let synced = w.into_inner().map_err(|e| e.into_error()).and_then(|file| file.sync_all());
        if let Err(e) = synced {
            let _ = fs::remove_file(&tmp);
            forget_temporary(&tmp);
            return Err(e).with_context(|| format!("writing {}", f.target.display()));
        }
        ready.push((f.target.clone(), tmp));
    }
    if exchange_folder(&ready) {
        for (target, tmp) in &ready {
            forget_temporary(tmp);
            if let Ok(c) = fs::canonicalize(target) {
                registry().written.push(c);
            }
        }
        return Ok(());
    }
    for (target, tmp) in &ready {
        if let Err(e) = fs::rename(tmp, target) {
            let _ = fs::remove_file(tmp);
            forget_temporary(tmp);
            return Err(e).with_context(|| format!("writing {}", target.display()));
        }
        forget_temporary(tmp);
        if let Ok(c) = fs::canonicalize(target) {
            registry().written.push(c);
        }
    }
    Ok(())
}

/// Puts the written temporaries `ready` (target, temporary) in place at once, when there are
/// several and all are in one folder: a sibling folder `.NAME.swap-PID` is made holding hard
/// links to the folder's other files and the new files, the two folders are exchanged in one
/// `renameat2(RENAME_EXCHANGE)`, and the old one, now at the sibling's name, is removed. The
/// new folder is locked before it is exchanged, so the lock passes with it. Returns false with
/// nothing changed where that cannot be done: not Linux, one file, a folder holding subfolders
/// or this process's working folder, a file system without hard links or the exchange.
fn exchange_folder(ready: &[(PathBuf, PathBuf)]) -> bool {
    #[cfg(target_os = "linux")]
    if let Some(staged) = stage_exchange(ready) {
        return staged;
    }
    let _ = ready;
    false
}

/// [`exchange_folder`] on Linux: `None` when it does not apply, else whether it was done.
#[cfg(target_os = "linux")]
fn stage_exchange(ready: &[(PathBuf, PathBuf)]) -> Option<bool> {
    use std::collections::HashSet;
    if ready.len() < 2 {
        return None;
    }
    let dir = fs::canonicalize(ready[0].0.parent()?).ok()?;
    let names: HashSet<&std::ffi::OsStr> = ready.iter().filter_map(|(t, _)| t.file_name()).collect();
    if names.len() != ready.len()
        || ready.iter().any(|(t, _)| t.parent().and_then(|p| fs::canonicalize(p).ok()) != Some(dir.clone()))
    {
        return None;
    }
    if std::env::current_dir().is_ok_and(|cwd| cwd.starts_with(&dir)) {
        return None;
    }
    let (parent, name) = (dir.parent()?, dir.file_name()?);
    remove_stale_staging(parent, name);
    let staging = parent.join(format!(".{}.swap-{}", name.to_string_lossy(), std::process::id()));
    let _ = fs::remove_dir_all(&staging);
    fs::create_dir(&staging).ok()?;
    register_temporary(&staging);
    // The new folder keeps the old one's permission bits (a group-writable results folder).
    if let Ok(m) = fs::metadata(&dir) {
        let _ = fs::set_permissions(&staging, m.permissions());
    }
    let temps: HashSet<&std::ffi::OsStr> = ready.iter().filter_map(|(_, t)| t.file_name()).collect();
    let give_up = |moved: &[(PathBuf, PathBuf)]| {
        for (tmp, at) in moved {
            let _ = fs::rename(at, tmp);
        }
        let _ = fs::remove_dir_all(&staging);
        forget_temporary(&staging);
        Some(false)
    };
    if !link_others(&dir, &staging, |n| names.contains(n) || temps.contains(n)) {
        return give_up(&[]);
    }
    let mut moved = Vec::with_capacity(ready.len());
    for (target, tmp) in ready {
        let at = staging.join(target.file_name()?);
        if fs::rename(tmp, &at).is_err() {
            return give_up(&moved);
        }
        moved.push((tmp.clone(), at));
    }
    let Ok(lock) = File::open(&staging) else { return give_up(&moved) };
    if lock.try_lock().is_err() {
        return give_up(&moved);
    }
    if !exchange(&staging, &dir) {
        return give_up(&moved);
    }
    // `staging` names the old folder now; the new one, at `dir`, is locked by `lock`.
    {
        let mut reg = registry();
        reg.locks.retain(|(d, _)| *d != dir);
        reg.locks.push((dir.clone(), lock));
    }
    let _ = fs::remove_dir_all(&staging);
    forget_temporary(&staging);
    Some(true)
}

/// Puts hard links to the files of `dir` (and copies of its symbolic links) into `staging`, but
/// those whose names `skip` says; false when one cannot be (a subfolder, another file system).
#[cfg(target_os = "linux")]
fn link_others(dir: &Path, staging: &Path, skip: impl Fn(&std::ffi::OsStr) -> bool) -> bool {
    let Ok(entries) = fs::read_dir(dir) else { return false };
    entries.flatten().filter(|e| !skip(&e.file_name())).all(|entry| {
        let at = staging.join(entry.file_name());
        match entry.file_type() {
            Ok(t) if t.is_symlink() => {
                fs::read_link(entry.path()).and_then(|to| std::os::unix::fs::symlink(to, at)).is_ok()
            }
            Ok(t) if t.is_file() => fs::hard_link(entry.path(), at).is_ok(),
            _ => false,
        }
    })
}

/// Exchanges the folders `a` and `b` in one step (`renameat2(RENAME_EXCHANGE)`); false where
/// the file system cannot.
#[cfg(target_os = "linux")]
fn exchange(a: &Path, b: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| std::ffi::CString::new(p.as_os_str().as_bytes()).ok();
    let (Some(a), Some(b)) = (c(a), c(b)) else { return false };
    // SAFETY: two NUL-terminated paths that outlive the call; renameat2 reads nothing else.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    rc == 0
}

/// Removes staging folders `.NAME.swap-PID` in `parent` left by processes that no longer run
/// (killed within [`stage_exchange`]).
#[cfg(target_os = "linux")]
fn remove_stale_staging(parent: &Path, name: &std::ffi::OsStr) {
    let prefix = format!(".{}.swap-", name.to_string_lossy());
    let Ok(entries) = fs::read_dir(parent) else { return };
    for e in entries.flatten() {
        let n = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = n.strip_prefix(&prefix).and_then(|p| p.parse::<i32>().ok()) else { continue };
        // SAFETY: kill with signal 0 only checks whether the process exists.
        let gone =
            unsafe { libc::kill(pid, 0) } != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        if gone {
            let _ = fs::remove_dir_all(e.path());
        }
    }
}

/// Writes `bytes` to `path` whole or not at all.
pub(crate) fn write(path: &Path, bytes: impl AsRef<[u8]>) -> anyhow::Result<()> {
    let mut f = AtomicFile::create(path)?;
    f.write_all(bytes.as_ref()).with_context(|| format!("writing {}", path.display()))?;
    f.commit()
}

/// Fails now, before any work, where the outputs could not be written later: `out` (the output
/// folder; `outputs/` when not given) and the folder of `report`, each checked at its nearest
/// existing folder by creating and removing a probe file there. A search of hours is not run
/// for outputs that cannot be written.
pub(crate) fn check_writable(out: Option<&Path>, report: Option<&Path>) -> anyhow::Result<()> {
    let report_dir = report.map(|r| r.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")));
    for (what, dir) in [
        ("output folder", out.unwrap_or(Path::new("outputs"))),
        ("report's folder", report_dir.unwrap_or(Path::new("."))),
    ] {
        let mut at = dir;
        while !at.exists() {
            at = match at.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
        }
        if !at.is_dir() {
            anyhow::bail!("{what} {}: {} is not a folder; nothing was run", dir.display(), at.display());
        }
        let probe = at.join(format!(".servesim-probe-{}", std::process::id()));
        match fs::OpenOptions::new().write(true).create_new(true).open(&probe) {
            Ok(_) => {
                let _ = fs::remove_file(&probe);
            }
            Err(e) => anyhow::bail!("{what} {}: cannot write in {}: {e}; nothing was run", dir.display(), at.display()),
        }
    }
    Ok(())
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
        fs::write(&p, "old\n").unwrap();
        {
            // An error on the way: the writer is dropped before commit.
            let mut f = AtomicFile::create(&p).unwrap();
            f.write_all(b"half a li").unwrap();
        }
        assert_eq!(fs::read_to_string(&p).unwrap(), "old\n");
        write(&p, "new\n").unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "new\n");
        // The same output twice in one run, or over an input, is refused and leaves it alone.
        let e = write(&p, "again\n").unwrap_err().to_string();
        assert!(e.starts_with("refusing to write") && e.contains("twice"), "{e}");
        let input = dir.join("in.toml");
        fs::write(&input, "x = 1\n").unwrap();
        register_input(&input, "scenario");
        let e = write(&input, "y").unwrap_err().to_string();
        assert!(e.ends_with("in.toml: it is this run's scenario; choose another output path"), "{e}");
        assert_eq!(fs::read_to_string(&input).unwrap(), "x = 1\n");
        fs::remove_file(&input).unwrap();
        let names: Vec<String> =
            fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        assert_eq!(names, ["out.csv"]);
        // A target that is a folder: an error, nothing left behind.
        fs::create_dir_all(dir.join("sub")).unwrap();
        assert!(write(&dir.join("sub"), "x").is_err());
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 2);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn files_of_one_folder_appear_together_by_exchanging_it_and_the_rest_stays() {
        use std::os::unix::fs::MetadataExt;
        let root = std::env::temp_dir().join(format!("servesim-exchange-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        let dir = root.join("out");
        fs::create_dir_all(&dir).unwrap();
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o770)).unwrap();
        fs::write(dir.join("a.csv"), "old a\n").unwrap();
        fs::write(dir.join("notes.txt"), "the user's\n").unwrap();
        std::os::unix::fs::symlink("notes.txt", dir.join("link")).unwrap();
        // A staging folder of a process that no longer runs (pid beyond pid_max).
        fs::create_dir_all(root.join(".out.swap-2147483646")).unwrap();
        let before = fs::metadata(&dir).unwrap().ino();
        let write2 = |a: &str, b: &str| {
            let mut fa = AtomicFile::create(&dir.join("a.csv")).unwrap();
            fa.write_all(a.as_bytes()).unwrap();
            let mut fb = AtomicFile::create(&dir.join("b.csv")).unwrap();
            fb.write_all(b.as_bytes()).unwrap();
            commit_all([fa, fb]).unwrap();
            let mine = fs::canonicalize(&dir).unwrap();
            registry().written.retain(|p| !p.starts_with(&mine));
        };
        write2("new a\n", "new b\n");
        // A new folder took the old one's place in one step, with its permissions.
        assert_ne!(fs::metadata(&dir).unwrap().ino(), before);
        assert_eq!(fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o770);
        assert_eq!(fs::read_to_string(dir.join("a.csv")).unwrap(), "new a\n");
        assert_eq!(fs::read_to_string(dir.join("b.csv")).unwrap(), "new b\n");
        assert_eq!(fs::read_to_string(dir.join("notes.txt")).unwrap(), "the user's\n");
        assert_eq!(fs::read_link(dir.join("link")).unwrap(), Path::new("notes.txt"));
        let beside: Vec<_> = fs::read_dir(&root).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(beside, ["out"], "staging folders left beside it");
        // The lock passed to the new folder.
        let other = File::open(&dir).unwrap();
        assert!(matches!(other.try_lock(), Err(fs::TryLockError::WouldBlock)));
        // A folder holding a subfolder is not exchanged: the files are renamed in place.
        fs::create_dir_all(dir.join("sub")).unwrap();
        let before = fs::metadata(&dir).unwrap().ino();
        write2("third a\n", "third b\n");
        assert_eq!(fs::metadata(&dir).unwrap().ino(), before);
        assert_eq!(fs::read_to_string(dir.join("b.csv")).unwrap(), "third b\n");
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 5);
        let mine = fs::canonicalize(&dir).unwrap();
        registry().locks.retain(|(d, _)| *d != mine);
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_second_process_cannot_lock_a_folder_this_one_writes() {
        let dir = std::env::temp_dir().join(format!("servesim-lock-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        write(&dir.join("a.json"), "{}").unwrap();
        // Another open file description (as another process would have) finds it locked.
        let other = File::open(&dir).unwrap();
        assert!(matches!(other.try_lock(), Err(fs::TryLockError::WouldBlock)));
        fs::remove_dir_all(&dir).unwrap();
    }
}
