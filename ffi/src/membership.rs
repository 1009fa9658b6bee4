//! `baton_group` (members under a prefix), `baton_member` (one membership)
//! and `baton_members_watch` (joins, leaves and updates).

use std::ffi::{c_char, CString};
use std::sync::Mutex;

use baton::{Group, Member, MemberInfo, MemberLost, MembersWatch, MembershipEvent};

use crate::cancel::baton_cancel;
use crate::client::baton_client;
use crate::election::BATON_SESSION_ID_SIZE;
use crate::error::{baton_result, Failure};
use crate::hold::into_handle;
use crate::session::{baton_lost_reason, baton_session};
use crate::util::{
    boundary, boundary_value, bytes_arg, check_pid, copy_str_out, handle, null, str_arg,
    timeout_ms, write_opt,
};

/// A group of members under one KV prefix: member `id` is the key
/// `<prefix>/<id>`, acquired with its member's session, so the group lists
/// exactly the processes alive in it. The handle holds no state at Consul.
/// Thread-safe.
pub struct baton_group {
    group: Group,
    pid: u32,
}

impl baton_group {
    fn get(&self) -> Result<&Group, Failure> {
        check_pid(self.pid)?;
        Ok(&self.group)
    }
}

/// Creates a handle of the group on `prefix` (one trailing `/` is dropped; no
/// request is made). Writes `*group_out` on success; free it with
/// `baton_group_free`. `BATON_INVALID_ARGUMENT` for an empty prefix.
#[no_mangle]
#[must_use]
pub unsafe extern "C" fn baton_group_new(
    client: *const baton_client,
    prefix: *const c_char,
    group_out: *mut *mut baton_group,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let c = unsafe { handle(client, "client") }?.get()?;
        // SAFETY: NULL or a NUL-terminated string alive during the call.
        let prefix = unsafe { str_arg(prefix, "prefix") }?;
        if group_out.is_null() {
            return Err(null("group_out"));
        }
        let g = c.group(prefix)?;
        let h = baton_group {
            group: g,
            pid: std::process::id(),
        };
        // SAFETY: checked non-NULL; writable per the caller.
        unsafe { into_handle(h, group_out) };
        Ok(())
    })
}

/// Frees a group handle (memberships made from it stay). NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn baton_group_free(group: *mut baton_group) {
    boundary_value((), || {
        if group.is_null() {
            return;
        }
        // SAFETY: a pointer from baton_group_new, freed once.
        let b = unsafe { Box::from_raw(group) };
        if b.pid == std::process::id() {
            drop(b);
        } else {
            std::mem::forget(b);
        }
    })
}

/// Why a membership ended.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum baton_member_lost {
    /// This process left (`baton_member_leave`, or `baton_member_free`).
    BATON_MEMBER_LEFT = 1,
    /// The member key no longer carries our session (deleted or released by
    /// someone else).
    BATON_MEMBER_KEY_CHANGED = 2,
    /// The member's session was lost; the session reason says why.
    BATON_MEMBER_SESSION_LOST = 3,
}

fn member_lost(l: MemberLost) -> (baton_member_lost, baton_lost_reason) {
    match l {
        MemberLost::Left => (
            baton_member_lost::BATON_MEMBER_LEFT,
            baton_lost_reason::BATON_LOST_NONE,
        ),
        MemberLost::SessionLost(r) => (baton_member_lost::BATON_MEMBER_SESSION_LOST, r.into()),
        MemberLost::KeyChanged => (
            baton_member_lost::BATON_MEMBER_KEY_CHANGED,
            baton_lost_reason::BATON_LOST_NONE,
        ),
    }
}

/// The name of why a membership ended, as Python and Node report it:
/// `"left"`, `"key_changed"`, `"session_lost"`; `"unknown"` for another
/// number. A static NUL-terminated string, never freed.
#[no_mangle]
pub extern "C" fn baton_member_lost_name(reason: u32) -> *const c_char {
    let s: &'static str = match reason {
        1 => "left\0",
        2 => "key_changed\0",
        3 => "session_lost\0",
        _ => "unknown\0",
    };
    s.as_ptr().cast()
}

/// One membership of a group, from `baton_group_join`. It lasts until
/// `baton_member_leave`, `baton_member_free` (which leaves), or its loss (the
/// session ends or the key stops carrying it). Thread-safe.
pub struct baton_member {
    member: Member,
    pid: u32,
}

impl baton_member {
    fn get(&self) -> Result<&Member, Failure> {
        check_pid(self.pid)?;
        Ok(&self.member)
    }
}

/// Joins the group as member `id` (one key segment: no `/`) with `value`
/// (`value_len` bytes; NULL when 0), under `session` (NULL: the client's
/// default session). Writes `*member_out` on success; free it with
/// `baton_member_free`. `BATON_INVALID_ARGUMENT` for a bad id;
/// `BATON_CONFLICT` when the id is taken by a live session (the message names
/// it) or held back by a lock-delay.
#[no_mangle]
#[must_use]
pub unsafe extern "C" fn baton_group_join(
    group: *const baton_group,
    id: *const c_char,
    value: *const u8,
    value_len: usize,
    session: *const baton_session,
    member_out: *mut *mut baton_member,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let g = unsafe { handle(group, "group") }?.get()?;
        // SAFETY: NULL or a NUL-terminated string alive during the call.
        let id = unsafe { str_arg(id, "id") }?;
        // SAFETY: the caller guarantees `value_len` readable bytes at `value`.
        let value = unsafe { bytes_arg(value, value_len, "value") }?;
        if member_out.is_null() {
            return Err(null("member_out"));
        }
        // SAFETY: the caller passes NULL or a live session handle.
        let m = match unsafe { session.as_ref() } {
            Some(s) => g.join_with_session(id, value, s.get()?)?,
            None => g.join(id, value)?,
        };
        let h = baton_member {
            member: m,
            pid: std::process::id(),
        };
        // SAFETY: checked non-NULL; writable per the caller.
        unsafe { into_handle(h, member_out) };
        Ok(())
    })
}

/// Leaves the group: the membership ends (`BATON_MEMBER_LEFT`) and the member
/// key is deleted. `BATON_NOT_HELD` when it was no longer a member (left
/// before, or lost: the message says why). A failed delete is reported and
/// goes on in the background; the member has left either way.
#[no_mangle]
pub unsafe extern "C" fn baton_member_leave(member: *const baton_member) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let m = unsafe { handle(member, "member") }?.get()?;
        if m.leave()? {
            Ok(())
        } else {
            let why = m.lost().map_or("unknown", MemberLost::name);
            Err(Failure::new(
                baton_result::BATON_NOT_HELD,
                format!("member {:?} is no longer a member: {why}", m.id()),
            ))
        }
    })
}

/// Whether this is still a member: not left, not lost, session valid. False
/// for NULL and in a forked child.
#[no_mangle]
pub unsafe extern "C" fn baton_member_is_member(member: *const baton_member) -> bool {
    boundary_value(false, || {
        // SAFETY: the caller passes NULL or a live handle.
        unsafe { member.as_ref() }
            .and_then(|m| m.get().ok())
            .is_some_and(Member::is_member)
    })
}

/// Replaces the member's value (`value_len` bytes; NULL when 0), checking the
/// key still carries the member's session. `BATON_CONFLICT` when this is no
/// longer a member.
#[no_mangle]
pub unsafe extern "C" fn baton_member_update_value(
    member: *const baton_member,
    value: *const u8,
    value_len: usize,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let m = unsafe { handle(member, "member") }?.get()?;
        // SAFETY: the caller guarantees `value_len` readable bytes at `value`.
        let v = unsafe { bytes_arg(value, value_len, "value") }?;
        m.update_value(v)?;
        Ok(())
    })
}

/// Copies the member's key (`<prefix>/<id>`), NUL-terminated, into `buf` of
/// `len` bytes; `*len_out` (if not NULL) gets its length without the NUL, also
/// with `BATON_BUFFER_TOO_SMALL`.
#[no_mangle]
pub unsafe extern "C" fn baton_member_key(
    member: *const baton_member,
    buf: *mut c_char,
    len: usize,
    len_out: *mut usize,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let m = unsafe { handle(member, "member") }?.get()?;
        // SAFETY: the caller guarantees `buf`/`len` and `len_out`.
        unsafe { copy_str_out(m.key().as_bytes(), buf, len, len_out) }
    })
}

/// Blocks until the membership ends and writes why to `*reason_out` and
/// `*session_reason_out` (each may be NULL; the session reason is
/// `BATON_LOST_NONE` unless `BATON_MEMBER_SESSION_LOST`); returns at once when
/// it has ended. `BATON_TIMEOUT` if still a member at `timeout_ms`;
/// `BATON_CANCELLED` through `cancel` (may be NULL).
#[no_mangle]
pub unsafe extern "C" fn baton_member_wait_lost(
    member: *const baton_member,
    timeout_ms_: u64,
    cancel: *const baton_cancel,
    reason_out: *mut baton_member_lost,
    session_reason_out: *mut baton_lost_reason,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let m = unsafe { handle(member, "member") }?.get()?;
        // SAFETY: the caller passes NULL or a live cancel handle.
        let cancel = unsafe { cancel.as_ref() }.map(|c| &c.token);
        let (why, session) = member_lost(m.wait_lost(timeout_ms(timeout_ms_), cancel)?);
        // SAFETY: NULL or writable per the caller.
        unsafe {
            write_opt(reason_out, why);
            write_opt(session_reason_out, session);
        }
        Ok(())
    })
}

/// Frees a membership: leaves the group if still a member. NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn baton_member_free(member: *mut baton_member) {
    boundary_value((), || {
        if member.is_null() {
            return;
        }
        // SAFETY: a pointer from baton_group_join, freed once.
        let b = unsafe { Box::from_raw(member) };
        if b.pid == std::process::id() {
            drop(b);
        } else {
            std::mem::forget(b);
        }
    })
}

/// One live member of a group, as read from Consul. Its strings and value
/// belong to the array or event that holds it.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct baton_member_info {
    /// The member's id (the last segment of its key), NUL-terminated.
    pub id: *const c_char,
    /// The value the member joined with or last set (NULL when empty).
    pub value: *const u8,
    /// The length of `value`.
    pub value_len: usize,
    /// The session the member key is acquired with, NUL-terminated.
    pub session: [c_char; BATON_SESSION_ID_SIZE],
    /// The raft index at which the member key was created: members sorted by it
    /// are in joining order.
    pub create_index: u64,
    /// The raft index of the key's last change.
    pub modify_index: u64,
}

/// A C copy of `m` owning its id and value (freed by `free_info`).
fn info_of(m: &MemberInfo) -> baton_member_info {
    let id = CString::new(m.id.as_str())
        .unwrap_or_default()
        .into_raw()
        .cast_const();
    let value: *const u8 = if m.value.is_empty() {
        std::ptr::null()
    } else {
        Box::into_raw(m.value.clone().into_boxed_slice()).cast::<u8>()
    };
    let mut session = [0 as c_char; BATON_SESSION_ID_SIZE];
    for (d, s) in session
        .iter_mut()
        .zip(m.session.bytes().take(BATON_SESSION_ID_SIZE - 1))
    {
        *d = s as c_char;
    }
    baton_member_info {
        id,
        value,
        value_len: m.value.len(),
        session,
        create_index: m.create_index,
        modify_index: m.modify_index,
    }
}

/// Frees what `info_of` allocated.
///
/// # Safety
/// `i` came from `info_of` and is freed once.
unsafe fn free_info(i: &baton_member_info) {
    if !i.id.is_null() {
        // SAFETY: from CString::into_raw in info_of.
        drop(unsafe { CString::from_raw(i.id.cast_mut()) });
    }
    if !i.value.is_null() {
        let slice = std::ptr::slice_from_raw_parts_mut(i.value.cast_mut(), i.value_len);
        // SAFETY: from Box::<[u8]>::into_raw in info_of, with this length.
        drop(unsafe { Box::from_raw(slice) });
    }
}

/// An array of infos allocated by the library, freed by `free_infos`.
fn infos_of(ms: &[MemberInfo]) -> (*mut baton_member_info, usize) {
    if ms.is_empty() {
        return (std::ptr::null_mut(), 0);
    }
    let b: Box<[baton_member_info]> = ms.iter().map(info_of).collect();
    let n = b.len();
    (Box::into_raw(b).cast::<baton_member_info>(), n)
}

/// # Safety
/// `p`/`n` came from `infos_of`, freed once.
unsafe fn free_infos(p: *mut baton_member_info, n: usize) {
    if p.is_null() {
        return;
    }
    // SAFETY: from Box::<[baton_member_info]>::into_raw with this length.
    let b = unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, n)) };
    for i in b.iter() {
        // SAFETY: each element came from info_of.
        unsafe { free_info(i) };
    }
}

/// Lists the live members (one consistent read of the prefix), sorted by id,
/// into a library-allocated array: `*members_out` (NULL when there are none)
/// and `*count_out`. Free it with `baton_members_free(members, count)`.
#[no_mangle]
pub unsafe extern "C" fn baton_group_members(
    group: *const baton_group,
    members_out: *mut *mut baton_member_info,
    count_out: *mut usize,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let g = unsafe { handle(group, "group") }?.get()?;
        if members_out.is_null() {
            return Err(null("members_out"));
        }
        if count_out.is_null() {
            return Err(null("count_out"));
        }
        let ms = g.members()?;
        let (p, n) = infos_of(&ms);
        // SAFETY: checked non-NULL; writable per the caller.
        unsafe {
            members_out.write(p);
            count_out.write(n);
        }
        Ok(())
    })
}

/// Frees an array from `baton_group_members` with the count it gave. NULL is
/// a no-op.
#[no_mangle]
pub unsafe extern "C" fn baton_members_free(members: *mut baton_member_info, count: usize) {
    boundary_value((), || {
        // SAFETY: NULL or an array from baton_group_members with its count, freed once.
        unsafe { free_infos(members, count) }
    })
}

/// What a `baton_membership_event` reports.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum baton_membership_event_kind {
    /// The members when the watch started (the first event), sorted by id, in
    /// `members`.
    BATON_MEMBERSHIP_SNAPSHOT = 1,
    /// A member joined: `members[0]`.
    BATON_MEMBERSHIP_JOINED = 2,
    /// The member `id` left or was lost (`members` is empty).
    BATON_MEMBERSHIP_LEFT = 3,
    /// A member changed its value: `members[0]`.
    BATON_MEMBERSHIP_UPDATED = 4,
}

/// One change of a group, from `baton_members_watch_next`; free it with
/// `baton_membership_event_free`.
#[repr(C)]
#[derive(Debug)]
pub struct baton_membership_event {
    /// What happened.
    pub kind: baton_membership_event_kind,
    /// The id of the member concerned, NUL-terminated (empty for a snapshot).
    pub id: *const c_char,
    /// The members: all of them for a snapshot, the one that joined or was
    /// updated, none for a leave (NULL when `members_len` is 0).
    pub members: *const baton_member_info,
    /// The number of `members`.
    pub members_len: usize,
}

fn event_of(ev: &MembershipEvent) -> baton_membership_event {
    use baton_membership_event_kind::*;
    let (kind, id, list): (_, &str, &[MemberInfo]) = match ev {
        MembershipEvent::Snapshot(all) => (BATON_MEMBERSHIP_SNAPSHOT, "", all),
        MembershipEvent::Joined(m) => (BATON_MEMBERSHIP_JOINED, &m.id, std::slice::from_ref(m)),
        MembershipEvent::Left(id) => (BATON_MEMBERSHIP_LEFT, id, &[]),
        MembershipEvent::Updated(m) => (BATON_MEMBERSHIP_UPDATED, &m.id, std::slice::from_ref(m)),
    };
    let (p, n) = infos_of(list);
    baton_membership_event {
        kind,
        id: CString::new(id).unwrap_or_default().into_raw().cast_const(),
        members: p,
        members_len: n,
    }
}

/// A watch of a group's members, from `baton_group_watch`. Use it from one
/// thread at a time (a second `next` on another thread waits for the first).
pub struct baton_members_watch {
    watch: Mutex<MembersWatch>,
    pid: u32,
}

/// Starts watching the group: the first `baton_members_watch_next` reports the
/// current members, later ones each join, leave and value change seen.
/// Writes `*watch_out` on success; free it with `baton_members_watch_free`.
#[no_mangle]
#[must_use]
pub unsafe extern "C" fn baton_group_watch(
    group: *const baton_group,
    watch_out: *mut *mut baton_members_watch,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let g = unsafe { handle(group, "group") }?.get()?;
        if watch_out.is_null() {
            return Err(null("watch_out"));
        }
        let w = g.watch()?;
        let h = baton_members_watch {
            watch: Mutex::new(w),
            pid: std::process::id(),
        };
        // SAFETY: checked non-NULL; writable per the caller.
        unsafe { into_handle(h, watch_out) };
        Ok(())
    })
}

/// Waits up to `timeout_ms` (0 only looks; `BATON_WAIT_FOREVER` no limit) for
/// the next event and writes it to `*event_out` (free it with
/// `baton_membership_event_free`). The first is `BATON_MEMBERSHIP_SNAPSHOT`.
/// `BATON_TIMEOUT` when nothing happened in time (`*event_out` untouched);
/// `BATON_CANCELLED` through `cancel` (may be NULL); `BATON_CLOSED` when the
/// client closes. Failed polls are retried, not returned.
#[no_mangle]
pub unsafe extern "C" fn baton_members_watch_next(
    watch: *const baton_members_watch,
    timeout_ms_: u64,
    cancel: *const baton_cancel,
    event_out: *mut *mut baton_membership_event,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let w = unsafe { handle(watch, "watch") }?;
        check_pid(w.pid)?;
        if event_out.is_null() {
            return Err(null("event_out"));
        }
        // SAFETY: the caller passes NULL or a live cancel handle.
        let cancel = unsafe { cancel.as_ref() }.map(|c| &c.token);
        let mut g = w.watch.lock().unwrap_or_else(|p| p.into_inner());
        match g.next(timeout_ms(timeout_ms_), cancel)? {
            Some(ev) => {
                // SAFETY: checked non-NULL; writable per the caller.
                unsafe { into_handle(event_of(&ev), event_out) };
                Ok(())
            }
            None => Err(Failure::new(
                baton_result::BATON_TIMEOUT,
                format!("no membership change within {timeout_ms_} ms"),
            )),
        }
    })
}

/// Frees an event from `baton_members_watch_next`. NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn baton_membership_event_free(event: *mut baton_membership_event) {
    boundary_value((), || {
        if event.is_null() {
            return;
        }
        // SAFETY: a pointer from baton_members_watch_next, freed once.
        let b = unsafe { Box::from_raw(event) };
        if !b.id.is_null() {
            // SAFETY: from CString::into_raw in event_of.
            drop(unsafe { CString::from_raw(b.id.cast_mut()) });
        }
        // SAFETY: from infos_of in event_of, with this length.
        unsafe { free_infos(b.members.cast_mut(), b.members_len) };
    })
}

/// Frees a members watch (no call may still be using it). NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn baton_members_watch_free(watch: *mut baton_members_watch) {
    boundary_value((), || {
        if watch.is_null() {
            return;
        }
        // SAFETY: a pointer from baton_group_watch, freed once.
        let b = unsafe { Box::from_raw(watch) };
        if b.pid == std::process::id() {
            drop(b);
        } else {
            std::mem::forget(b);
        }
    })
}
