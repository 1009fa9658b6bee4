//! [`AsyncCounter`], [`AsyncGroup`] and [`AsyncMember`], and the next value of a counter's
//! watch or the next event of a group's, as futures that hold no thread while they wait.

use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use super::super::bounded::Bounded;
use super::super::call::Call;
use super::super::wake::WakeSlot;
use super::super::Waiting;
use crate::client::Client;
use crate::foundations::cancel::CancelToken;
use crate::foundations::error::{Error, ErrorKind, Result};
use crate::foundations::sync::lock;
use crate::recipes::counter::{Counter, CounterWatch};
use crate::recipes::membership::{
    Group, Member, MemberInfo, MemberLost, MembersWatch, MembershipEvent,
};

/// A [`Counter`]'s requests as futures (each one [`Call`] on a step thread).
pub trait AsyncCounter {
    /// [`Counter::get`] as a future.
    fn get_async(&self) -> Call<i64>;
    /// [`Counter::set`] as a future.
    fn set_async(&self, value: i64) -> Call<()>;
    /// [`Counter::add`] as a future: the value after the add.
    fn add_async(&self, delta: i64) -> Call<i64>;
    /// [`Counter::compare_and_set`] as a future.
    fn compare_and_set_async(&self, expected: i64, new: i64) -> Call<bool>;
    /// [`Counter::watch`], shared for [`counter_next_shared`].
    fn watch_shared(&self) -> Result<SharedCounterWatch>;
}

impl AsyncCounter for Counter {
    fn get_async(&self) -> Call<i64> {
        Call::with(self.shared_client(), self.clone(), Counter::get)
    }
    fn set_async(&self, value: i64) -> Call<()> {
        Call::with(self.shared_client(), self.clone(), move |c| c.set(value))
    }
    fn add_async(&self, delta: i64) -> Call<i64> {
        Call::with(self.shared_client(), self.clone(), move |c| c.add(delta))
    }
    fn compare_and_set_async(&self, expected: i64, new: i64) -> Call<bool> {
        Call::with(self.shared_client(), self.clone(), move |c| {
            c.compare_and_set(expected, new)
        })
    }
    fn watch_shared(&self) -> Result<SharedCounterWatch> {
        Ok(Arc::new(Mutex::new(Some(self.watch()?))))
    }
}

/// A [`Group`]'s requests as futures.
pub trait AsyncGroup {
    /// [`Group::join`] as a future (a member nobody takes, the future dropped after the
    /// join was sent, leaves again).
    fn join_async(&self, id: &str, value: &[u8]) -> Call<Member>;
    /// [`Group::members`] as a future.
    fn members_async(&self) -> Call<Vec<MemberInfo>>;
    /// [`Group::watch`], shared for [`members_next_shared`].
    fn watch_shared(&self) -> Result<SharedMembersWatch>;
}

impl AsyncGroup for Group {
    fn join_async(&self, id: &str, value: &[u8]) -> Call<Member> {
        let (group, id, value) = (self.clone(), id.to_string(), value.to_vec());
        Call::start(
            self.shared_client(),
            CancelToken::new(),
            move |_| group.join(&id, &value),
            // Dropped unclaimed: the member leaves.
            Some(Box::new(drop)),
        )
    }
    fn members_async(&self) -> Call<Vec<MemberInfo>> {
        Call::with(self.shared_client(), self.clone(), Group::members)
    }
    fn watch_shared(&self) -> Result<SharedMembersWatch> {
        Ok(Arc::new(Mutex::new(Some(self.watch()?))))
    }
}

/// A [`Member`]'s calls as futures.
pub trait AsyncMember {
    /// [`Member::leave`] as a future.
    fn leave_async(&self) -> Call<bool>;
    /// [`Member::update_value`] as a future.
    fn update_value_async(&self, value: &[u8]) -> Call<()>;
    /// [`Member::wait_lost`] as a future that holds no thread: why the membership
    /// ended; kind `Timeout` when `timeout` passes first (`None`: no limit),
    /// `Cancelled` when `cancel` fires.
    fn lost_within(&self, timeout: Option<Duration>, cancel: &CancelToken) -> Waiting<MemberLost>;
}

impl AsyncMember for Member {
    fn leave_async(&self) -> Call<bool> {
        Call::with(self.shared_client(), self.view(), Member::leave)
    }
    fn update_value_async(&self, value: &[u8]) -> Call<()> {
        let value = value.to_vec();
        Call::with(self.shared_client(), self.view(), move |m| {
            m.update_value(&value)
        })
    }
    fn lost_within(&self, timeout: Option<Duration>, cancel: &CancelToken) -> Waiting<MemberLost> {
        let member = self.view();
        let slot = WakeSlot::new(false);
        let fire = slot.hook();
        let hook = member.cancel_token().on_cancel(move || fire());
        let ended = std::future::poll_fn(move |cx| {
            let _hook = &hook;
            slot.register(cx.waker());
            match member.lost() {
                Some(why) => Poll::Ready(Ok(why)),
                None => Poll::Pending,
            }
        });
        let still = format!("still a member as {:?} at timeout", self.id());
        Box::pin(Bounded::new(
            self.shared_client(),
            ended,
            timeout,
            Some(cancel),
            still,
            "wait for membership loss cancelled",
        ))
    }
}

/// A [`CounterWatch`] shared by a language binding's watch object and its pending calls:
/// `None` once the watch is closed.
pub type SharedCounterWatch = Arc<Mutex<Option<CounterWatch>>>;

/// A [`MembersWatch`] shared the same way.
pub type SharedMembersWatch = Arc<Mutex<Option<MembersWatch>>>;

/// What [`next_of`] needs of a watch.
trait Polled: Send + 'static {
    type Item: Send + 'static;
    fn client(&self) -> &Client;
    fn poll_item(&mut self, cx: &mut std::task::Context<'_>) -> Poll<Result<Self::Item>>;
}

impl Polled for CounterWatch {
    type Item = i64;
    fn client(&self) -> &Client {
        CounterWatch::client(self)
    }
    fn poll_item(&mut self, cx: &mut std::task::Context<'_>) -> Poll<Result<i64>> {
        self.poll_value(cx)
    }
}

impl Polled for MembersWatch {
    type Item = MembershipEvent;
    fn client(&self) -> &Client {
        MembersWatch::client(self)
    }
    fn poll_item(&mut self, cx: &mut std::task::Context<'_>) -> Poll<Result<MembershipEvent>> {
        self.poll_event(cx)
    }
}

/// [`CounterWatch::next`] of a shared watch as a future that holds no thread: the next
/// value, `Ok(None)` when `timeout` passes first (`None`: no limit), kind `Cancelled`
/// when `cancel` fires, `Closed` once the watch is closed (taken out) or the client is.
pub fn counter_next_shared(
    watch: &SharedCounterWatch,
    timeout: Option<Duration>,
    cancel: &CancelToken,
) -> Waiting<Option<i64>> {
    next_of(watch, timeout, cancel, "counter watch")
}

/// [`MembersWatch::next`] of a shared watch as a future that holds no thread: the next
/// event, `Ok(None)` when `timeout` passes first, errors as [`counter_next_shared`]'s.
pub fn members_next_shared(
    watch: &SharedMembersWatch,
    timeout: Option<Duration>,
    cancel: &CancelToken,
) -> Waiting<Option<MembershipEvent>> {
    next_of(watch, timeout, cancel, "group watch")
}

fn next_of<W: Polled>(
    watch: &Arc<Mutex<Option<W>>>,
    timeout: Option<Duration>,
    cancel: &CancelToken,
    what: &'static str,
) -> Waiting<Option<W::Item>> {
    let closed = move || Error::new(ErrorKind::Closed, format!("the {what} was closed"));
    let Some(client) = lock(watch).as_ref().map(|w| w.client().clone()) else {
        return Box::pin(std::future::ready(Err(closed())));
    };
    let watch = Arc::clone(watch);
    let slot = WakeSlot::new(false);
    let fire = slot.hook();
    let closing = client.core().closing.on_cancel(move || fire());
    let next = std::future::poll_fn(move |cx| {
        let _closing = &closing;
        slot.register(cx.waker());
        match lock(&watch).as_mut() {
            Some(w) => w.poll_item(cx),
            None => Poll::Ready(Err(closed())),
        }
    });
    let bounded = Bounded::new(
        &client,
        next,
        timeout,
        Some(cancel),
        "no change before the timeout",
        format!("{what} cancelled"),
    );
    Box::pin(async move {
        match bounded.await {
            Ok(item) => Ok(Some(item)),
            Err(e) if e.kind() == ErrorKind::Timeout => Ok(None),
            Err(e) => Err(e),
        }
    })
}
