//! The service manager's notification protocol (sd_notify(3)) over a plain Unix datagram socket:
//! `READY=1` once the proxy forwards, `WATCHDOG=1` while its loop runs, `STOPPING=1` on the way
//! out. No libsystemd: the protocol is one datagram per message to the socket named by
//! `$NOTIFY_SOCKET` (a path, or `@name` in the abstract namespace).
//!
//! The same protocol links the bridge-mode supervisor to its worker (`supervisor`): the
//! supervisor hands the worker a socket of its own in `$NOTIFY_SOCKET`.

use std::io;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::{Duration, Instant};

/// Where the service manager listens, and how often it wants a watchdog message.
#[derive(Debug)]
pub struct Notifier {
    sock: UnixDatagram,
    to: SocketAddr,
    /// Interval between `WATCHDOG=1` messages (a quarter of `$WATCHDOG_USEC`), when asked for.
    watchdog_every: Option<Duration>,
    last_watchdog: Option<Instant>,
}

/// The address a `$NOTIFY_SOCKET` value names: `@name` is abstract, `/path` a file.
pub fn parse_address(s: &str) -> io::Result<SocketAddr> {
    if let Some(name) = s.strip_prefix('@') {
        use std::os::linux::net::SocketAddrExt as _;
        SocketAddr::from_abstract_name(name.as_bytes())
    } else if s.starts_with('/') {
        SocketAddr::from_pathname(s)
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "NOTIFY_SOCKET is neither a path nor @abstract",
        ))
    }
}

/// The watchdog interval asked for by `$WATCHDOG_USEC` (for this process: `$WATCHDOG_PID`, when
/// set, must be ours), sent at a quarter of it so that one late loop turn does not trip it.
fn watchdog_from(usec: Option<&str>, pid: Option<&str>, own_pid: u32) -> Option<Duration> {
    if pid.is_some_and(|p| p.trim().parse::<u32>().ok() != Some(own_pid)) {
        return None;
    }
    let usec: u64 = usec?.trim().parse().ok().filter(|&u| u > 0)?;
    Some(Duration::from_micros(usec) / 4)
}

impl Notifier {
    /// The notifier the environment describes (`$NOTIFY_SOCKET`, `$WATCHDOG_USEC`,
    /// `$WATCHDOG_PID`); `None` outside a service manager.
    pub fn from_env() -> io::Result<Option<Self>> {
        let Some(addr) = std::env::var_os("NOTIFY_SOCKET") else {
            return Ok(None);
        };
        let to = parse_address(&addr.to_string_lossy())?;
        let usec = std::env::var("WATCHDOG_USEC").ok();
        let pid = std::env::var("WATCHDOG_PID").ok();
        let mut n = Self::new(to)?;
        n.watchdog_every = watchdog_from(usec.as_deref(), pid.as_deref(), std::process::id());
        Ok(Some(n))
    }

    /// A notifier sending to `to`, without a watchdog.
    pub fn new(to: SocketAddr) -> io::Result<Self> {
        Ok(Self {
            sock: UnixDatagram::unbound()?,
            to,
            watchdog_every: None,
            last_watchdog: None,
        })
    }

    /// Send one notification (e.g. `READY=1`).
    pub fn send(&self, msg: &str) -> io::Result<()> {
        self.sock.send_to_addr(msg.as_bytes(), &self.to).map(|_| ())
    }

    /// The watchdog interval, if the manager asked for one.
    pub fn watchdog_every(&self) -> Option<Duration> {
        self.watchdog_every
    }

    /// Send `WATCHDOG=1` if one is due at `now` (call once per loop turn).
    pub fn feed_watchdog(&mut self, now: Instant) {
        let Some(every) = self.watchdog_every else {
            return;
        };
        if self
            .last_watchdog
            .is_none_or(|t| now.saturating_duration_since(t) >= every)
        {
            self.last_watchdog = Some(now);
            if let Err(e) = self.send("WATCHDOG=1") {
                tracing::debug!(error = %e, "watchdog notification");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watchdog_interval_from_the_environment() {
        assert_eq!(
            watchdog_from(Some("2000000"), None, 7),
            Some(Duration::from_millis(500))
        );
        assert_eq!(
            watchdog_from(Some("2000000"), Some("7"), 7),
            Some(Duration::from_millis(500))
        );
        assert_eq!(watchdog_from(Some("2000000"), Some("8"), 7), None);
        assert_eq!(watchdog_from(Some("0"), None, 7), None);
        assert_eq!(watchdog_from(Some("x"), None, 7), None);
        assert_eq!(watchdog_from(None, None, 7), None);
    }

    #[test]
    fn notifications_reach_an_abstract_socket() {
        use std::os::linux::net::SocketAddrExt as _;
        let name = format!("sidekick-notify-test-{}", std::process::id());
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let rx = UnixDatagram::bind_addr(&addr).unwrap();
        rx.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut n = Notifier::new(parse_address(&format!("@{name}")).unwrap()).unwrap();
        n.send("READY=1").unwrap();
        n.watchdog_every = Some(Duration::from_millis(100));
        let t0 = Instant::now();
        n.feed_watchdog(t0);
        n.feed_watchdog(t0 + Duration::from_millis(50)); // not due
        n.feed_watchdog(t0 + Duration::from_millis(100));
        let mut buf = [0u8; 64];
        let mut got = Vec::new();
        for _ in 0..3 {
            let k = rx.recv(&mut buf).unwrap();
            got.push(String::from_utf8_lossy(&buf[..k]).into_owned());
        }
        assert_eq!(got, ["READY=1", "WATCHDOG=1", "WATCHDOG=1"]);
        rx.set_nonblocking(true).unwrap();
        assert!(
            rx.recv(&mut buf).is_err(),
            "a third watchdog was sent early"
        );
        assert!(parse_address("relative").is_err());
    }
}
