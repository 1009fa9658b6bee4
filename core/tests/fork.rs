//! After `fork()`, the child's calls fail with a clear error instead of using
//! threads that do not exist there.
#![allow(unsafe_code)]

mod common;

use common::Fixture;

#[test]
fn calls_in_a_forked_child_fail_clearly() {
    let f = Fixture::start();
    let c = f.client();
    c.kv().put("fork/x", b"1").unwrap();
    // SAFETY: the child only calls into baton (which fails fast without
    // touching threads or sockets) and then `_exit`s.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let code = match c.kv().get("fork/x") {
            Err(e) if e.kind() == baton::ErrorKind::Closed && e.to_string().contains("fork") => 0,
            _ => 1,
        };
        let closed = c.close(std::time::Duration::from_secs(1));
        let code = if closed { code } else { 2 };
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waiting for our own child.
    let r = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(r, pid);
    assert!(libc::WIFEXITED(status));
    assert_eq!(libc::WEXITSTATUS(status), 0, "child saw the wrong result");
    // The parent's client is unaffected.
    assert!(c.kv().get("fork/x").unwrap().is_some());
}
