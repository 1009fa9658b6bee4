//! The barriers, the counter and group membership as futures. Their waits
//! (a barrier's wait, a double barrier's enter and leave, the next value or
//! event of a watch, a member's loss) hold no thread: steps run on the client's
//! step threads, and in between a change hook, the client's timer or a cancel
//! token wakes the task. Their single requests are [`Call`]s.

mod barrier;
mod leader;
mod stepped;
mod values;

pub use barrier::{AsyncBarrier, AsyncDoubleBarrier};
pub use leader::{AsyncLeaderTask, LeaderTerms, Term};
pub use values::{
    counter_next_shared, members_next_shared, AsyncCounter, AsyncGroup, AsyncMember,
    SharedCounterWatch, SharedMembersWatch,
};
