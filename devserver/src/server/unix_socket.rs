//! The unix socket HTTP is served on beside TCP ([`crate::Config::unix_socket`], Consul's
//! `addresses.http = "unix:///path"`): binding it as a Consul agent's `listenSocket` does
//! (`agent/agent.go`: a socket file left at the path is replaced, then `unix_sockets.mode` is
//! applied), and removing the file when the server stops.

use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use tokio::net::UnixListener;

/// The socket file this server created; removed on drop when it is still that file (not one
/// another process put at the path since).
pub(super) struct SocketFile {
    path: PathBuf,
    /// `(st_dev, st_ino)` of the socket file as bound.
    id: (u64, u64),
}

impl SocketFile {
    /// The absolute path of the socket.
    pub(super) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for SocketFile {
    fn drop(&mut self) {
        let ours = std::fs::symlink_metadata(&self.path)
            .is_ok_and(|m| m.file_type().is_socket() && (m.dev(), m.ino()) == self.id);
        if ours {
            if let Err(e) = std::fs::remove_file(&self.path) {
                log::warn!(
                    "baton-devserver: cannot remove the socket {}: {e}",
                    self.path.display()
                );
            }
        }
    }
}

/// An error that names the socket's path.
fn named(path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("unix socket {}: {e}", path.display()))
}

/// Binds the unix socket at `path` (made absolute), in the current Tokio runtime: a socket
/// file already there is replaced (a stale one from a server that did not stop cleanly, as
/// Consul's `listenSocket` replaces it); any other kind of file there is refused, naming the
/// path. `mode` sets the socket file's permissions (Consul's `unix_sockets.mode`).
pub(super) fn bind(path: &Path, mode: Option<u32>) -> io::Result<(UnixListener, SocketFile)> {
    let path = std::path::absolute(path).map_err(|e| named(path, e))?;
    match std::fs::symlink_metadata(&path) {
        Ok(m) if m.file_type().is_socket() => {
            log::warn!("baton-devserver: replacing socket {}", path.display());
            std::fs::remove_file(&path).map_err(|e| named(&path, e))?;
        }
        Ok(m) => {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!(
                    "unix socket {}: the path exists and is not a socket ({}); not replacing it",
                    path.display(),
                    kind_of(&m.file_type())
                ),
            ))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(named(&path, e)),
    }
    let listener = UnixListener::bind(&path).map_err(|e| named(&path, e))?;
    let meta = std::fs::symlink_metadata(&path).map_err(|e| named(&path, e))?;
    let file = SocketFile {
        path,
        id: (meta.dev(), meta.ino()),
    };
    if let Some(mode) = mode {
        // `file` removes the socket again if this fails.
        std::fs::set_permissions(&file.path, std::fs::Permissions::from_mode(mode))
            .map_err(|e| named(&file.path, e))?;
    }
    Ok((listener, file))
}

/// What a file type is, for the refusal's message.
fn kind_of(t: &std::fs::FileType) -> &'static str {
    if t.is_dir() {
        "a directory"
    } else if t.is_symlink() {
        "a symbolic link"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_file() {
        "a regular file"
    } else {
        "a device or other special file"
    }
}
