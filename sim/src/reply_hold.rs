//! A fixed-level reply hold at the ap, for comparing PEMI's two enforcements without PEMI
//! (the fairness study's `--reply-hold`, [`crate::multi`]).

use std::time::Duration;

use sidekick_proxy::pemi::ReplyEnforcement;

/// PEMI's reply enforcement (PEMI §4.5.2) at one fixed level, without PEMI: the ap holds a
/// client's datagrams to the server (the replies of a download: its ACKs) as
/// [`ReplyEnforcement::hold`] says — every one by `delay`, or one in
/// [`sidekick_proxy::pemi::REORDER_EVERY`] so that the next overtake it. PEMI itself engages
/// the enforcement only while its flow exceeds its target rate, so the two mechanisms are
/// compared here at levels PEMI may never reach.
///
/// ```
/// use sidekick_sim::multi::ReplyHold;
/// let h: ReplyHold = "reorder:20ms".parse().unwrap();
/// assert_eq!(h.delay, std::time::Duration::from_millis(20));
/// assert!("hold:20ms".parse::<ReplyHold>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplyHold {
    /// Delay every reply, or reorder one in four.
    pub enforcement: ReplyEnforcement,
    /// How long a held reply waits.
    pub delay: Duration,
}

impl std::str::FromStr for ReplyHold {
    type Err = String;

    /// `delay:10ms` or `reorder:10ms` (the lab's duration syntax).
    fn from_str(s: &str) -> Result<Self, String> {
        let (e, d) = s
            .split_once(':')
            .ok_or_else(|| format!("{s:?}: want ENFORCEMENT:DURATION, e.g. delay:10ms"))?;
        Ok(Self {
            enforcement: e.parse().map_err(|e| format!("{s:?}: {e}"))?,
            delay: sidekick_lab::spec::parse_duration(d).map_err(|e| format!("{s:?}: {e}"))?,
        })
    }
}
