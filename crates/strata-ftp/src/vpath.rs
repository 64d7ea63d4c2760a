//! Paths as the FTP client sees them, confined to the served folder.
//!
//! The client sees a tree rooted at `/`, which is the served folder. A path it
//! sends is resolved lexically against its current folder (`..` may climb but
//! never above `/`: that is refused, not clamped), and the file system path it
//! names is then checked with the symlinks followed: a symlink inside the
//! folder that points out of it is refused for reading, listing, changing
//! into, and writing through. Files are created with `O_NOFOLLOW`, so a
//! symlink planted at the name after the check is not followed either.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Why a path cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    /// `..` would climb above the served folder.
    #[error("path climbs out of the served folder")]
    Escape,
    /// The path resolves (through a symlink) outside the served folder.
    #[error("path leads out of the served folder")]
    Outside,
    /// Nothing by that name.
    #[error("no such file or folder")]
    NotFound,
    /// The file system refused.
    #[error(transparent)]
    Io(io::Error),
}

impl From<io::Error> for PathError {
    fn from(e: io::Error) -> PathError {
        if e.kind() == io::ErrorKind::NotFound {
            PathError::NotFound
        } else {
            PathError::Io(e)
        }
    }
}

/// A path in the client's view: the components below `/`, none of them
/// empty, `.` or `..`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VPath(Vec<String>);

impl VPath {
    /// `/`.
    pub fn root() -> VPath {
        VPath::default()
    }

    /// The last component (`None` for `/`).
    pub fn name(&self) -> Option<&str> {
        self.0.last().map(String::as_str)
    }

    /// The path as the client sees it, `/a/b`.
    pub fn display(&self) -> String {
        if self.0.is_empty() {
            "/".to_string()
        } else {
            self.0.iter().map(|c| format!("/{c}")).collect()
        }
    }
}

/// The served folder.
#[derive(Debug)]
pub struct Root {
    real: PathBuf,
}

impl Root {
    /// Serves `dir`, which must be a folder.
    pub fn new(dir: &Path) -> io::Result<Root> {
        let real = dir.canonicalize()?;
        if !real.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                format!("{} is not a folder", dir.display()),
            ));
        }
        Ok(Root { real })
    }

    /// The folder's canonical path.
    pub fn path(&self) -> &Path {
        &self.real
    }

    /// `arg` resolved against `cwd`: absolute paths start at the served
    /// folder's top, `..` above it is refused.
    pub fn resolve(&self, cwd: &VPath, arg: &str) -> Result<VPath, PathError> {
        let mut parts = if arg.starts_with('/') {
            Vec::new()
        } else {
            cwd.0.clone()
        };
        for c in arg.split('/') {
            match c {
                "" | "." => {}
                ".." => {
                    parts.pop().ok_or(PathError::Escape)?;
                }
                c => parts.push(c.to_string()),
            }
        }
        Ok(VPath(parts))
    }

    fn lexical(&self, v: &VPath) -> PathBuf {
        let mut p = self.real.clone();
        p.extend(&v.0);
        p
    }

    fn inside(&self, real: &Path) -> Result<(), PathError> {
        if real.starts_with(&self.real) {
            Ok(())
        } else {
            Err(PathError::Outside)
        }
    }

    /// The real path of something that exists, symlinks followed and checked.
    pub fn existing(&self, v: &VPath) -> Result<PathBuf, PathError> {
        let real = self.lexical(v).canonicalize()?;
        self.inside(&real)?;
        Ok(real)
    }

    /// The real path of the entry `v` names, itself not followed if it is a
    /// symlink (its folder is, and must be inside): what `DELE` and `RMD`
    /// remove, so removing a symlink never touches what it points at. `/` is
    /// no entry.
    pub fn entry(&self, v: &VPath) -> Result<PathBuf, PathError> {
        let (name, parent) = v.0.split_last().ok_or(PathError::Outside)?;
        let dir = self.lexical(&VPath(parent.to_vec())).canonicalize()?;
        self.inside(&dir)?;
        Ok(dir.join(name))
    }

    /// The real path at which `v` may be created or overwritten: its folder
    /// exists inside the served one, and if the name exists as a symlink, it
    /// resolves inside too (a dangling one is refused: writing through it
    /// would create its target, wherever that is).
    pub fn creatable(&self, v: &VPath) -> Result<PathBuf, PathError> {
        let target = self.entry(v)?;
        match target.symlink_metadata() {
            Ok(m) if m.file_type().is_symlink() => {
                let real = target.canonicalize().map_err(|_| PathError::Outside)?;
                self.inside(&real)?;
                Ok(real)
            }
            _ => Ok(target),
        }
    }

    /// Opens `v` for writing: at `offset` (the file cut there), or at its end
    /// when `append`, or created empty.
    pub fn open_write(&self, v: &VPath, offset: u64, append: bool) -> Result<File, PathError> {
        let path = self.creatable(v)?;
        let mut o = OpenOptions::new();
        o.write(true).create(true).custom_flags(libc::O_NOFOLLOW);
        if append {
            o.append(true);
        }
        let f = o.open(path)?;
        if !f.metadata()?.is_file() {
            return Err(PathError::Io(io::Error::other("not a plain file")));
        }
        if !append {
            f.set_len(offset)?;
        }
        Ok(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_dot_climbs_inside_and_is_refused_above_the_top() {
        let root = Root {
            real: "/srv".into(),
        };
        let cwd = root.resolve(&VPath::root(), "a/b").unwrap();
        assert_eq!(cwd.display(), "/a/b");
        assert_eq!(root.resolve(&cwd, "../c").unwrap().display(), "/a/c");
        assert_eq!(root.resolve(&cwd, "/x/./y//").unwrap().display(), "/x/y");
        assert_eq!(root.resolve(&cwd, "../..").unwrap().display(), "/");
        assert!(matches!(
            root.resolve(&cwd, "../../../etc/passwd"),
            Err(PathError::Escape)
        ));
        assert!(matches!(
            root.resolve(&VPath::root(), "/.."),
            Err(PathError::Escape)
        ));
        assert_eq!(
            root.lexical(&root.resolve(&cwd, "/etc/passwd").unwrap()),
            Path::new("/srv/etc/passwd")
        );
    }
}
