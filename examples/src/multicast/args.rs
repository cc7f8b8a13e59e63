//! `sidekick-multicast client`'s flags, in the library so that the simulator reads a scenario's
//! `client_args` with the binary's own parser and defaults.

use std::net::SocketAddr;
use std::time::Duration;

use clap::{Args, Parser};
use sidekick::session::SidekickConfig;

use crate::media::MediaConfig;
use crate::media_session::ReceiverTiming;
use crate::media_sidekick::{EackMode, player_config};

/// The receivers' side: `sidekick-multicast client`.
#[derive(Args, Debug, Clone)]
pub struct MulticastClientArgs {
    /// Server address (unicast).
    #[arg(long)]
    pub connect: SocketAddr,
    /// Multicast group and port to join.
    #[arg(long, default_value = "239.1.2.3:5004")]
    pub group: SocketAddr,
    /// Receivers to run in this process.
    #[arg(long, default_value_t = 4)]
    pub receivers: usize,
    /// Stream duration, seconds.
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Print exactly one JSON line.
    #[arg(long)]
    pub json: bool,
    /// RTT assumed for re-NACKs before the first measurement, ms.
    #[arg(long, default_value_t = 200)]
    pub initial_rtt_ms: u64,
    /// After the server's FIN, keep NACKing missing packets for this long, ms.
    #[arg(long, default_value_t = 2000)]
    pub linger_ms: u64,
    /// Packrat for the group (Packrat (CoNEXT '26) §6.1): each receiver's session names the
    /// group; the proxy repairs from one shared cache.
    #[arg(long)]
    pub sidekick: bool,
    /// When to eACK.
    #[arg(long, value_enum, default_value_t = EackMode::Nack)]
    pub sidekick_eack: EackMode,
    /// eACK interval, ms (NACK-driven: while a packet is missing).
    #[arg(long, value_name = "MS", default_value_t = 25)]
    pub sidekick_eack_interval_ms: u32,
    /// Periodic eACKs: every N packets.
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub sidekick_eack_packets: u32,
    /// NACK-driven eACKs: how long a missing packet is eACKed and the NACK held, ms.
    #[arg(long, value_name = "MS", default_value_t = 50)]
    pub sidekick_reorder_ms: u32,
    /// Local eACK symbols (Packrat (CoNEXT '26) Table 4, multicast: 40).
    #[arg(long, value_name = "N", default_value_t = 40)]
    pub sidekick_eack_symbols: u32,
    /// The proxy's shared cache, bytes (Table 4, multicast: 64 kB).
    #[arg(long, value_name = "B", default_value_t = 64_000)]
    pub sidekick_cache_bytes: u64,
    /// Identifier width, bytes (the datagram's last N bytes; every receiver of the group must
    /// use the same, the proxy keeps the first one's).
    #[arg(long, value_name = "N", default_value_t = 4, value_parser = clap::builder::TypedValueParser::map(clap::builder::PossibleValuesParser::new(["2", "4", "8"]), |s: String| s.parse::<u32>().unwrap_or(4)))]
    pub sidekick_id_bytes: u32,
}

#[derive(Parser)]
#[command(no_binary_name = true)]
struct Standalone {
    #[command(flatten)]
    args: MulticastClientArgs,
}

impl MulticastClientArgs {
    /// Parses the flags alone (no program or subcommand name first).
    ///
    /// ```
    /// use sidekick_examples::multicast::MulticastClientArgs;
    /// let a = MulticastClientArgs::parse_flags(["--connect", "10.0.1.1:4433", "--receivers", "16",
    ///     "--sidekick"]).unwrap();
    /// assert_eq!(a.receivers, 16);
    /// assert!(a.sidekick_config().is_some());
    /// assert!(MulticastClientArgs::parse_flags(["--connect", "10.0.1.1:4433", "--frob"]).is_err());
    /// ```
    ///
    /// # Errors
    /// clap's, naming the flag.
    pub fn parse_flags<I, T>(flags: I) -> Result<Self, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        Standalone::try_parse_from(flags).map(|s| s.args)
    }

    /// The stream's configuration as the receivers see it.
    pub fn media_config(&self) -> MediaConfig {
        MediaConfig {
            initial_rtt: Duration::from_millis(self.initial_rtt_ms.max(1)),
            ..MediaConfig::default()
        }
    }

    /// The receivers' timing.
    pub fn timing(&self) -> ReceiverTiming {
        ReceiverTiming {
            linger: Duration::from_millis(self.linger_ms),
            ..ReceiverTiming::default()
        }
    }

    /// Each receiver's SDK configuration, with `--sidekick`: Packrat naming the group.
    pub fn sidekick_config(&self) -> Option<SidekickConfig> {
        self.sidekick.then(|| {
            let mut c = player_config(
                self.sidekick_eack,
                self.sidekick_eack_interval_ms,
                self.sidekick_eack_packets,
                self.sidekick_eack_symbols,
                self.sidekick_reorder_ms,
            );
            if let Some(p) = c.protocol.session.packrat.as_mut() {
                p.cache_capacity_bytes = self.sidekick_cache_bytes;
            }
            c.with_identifier_width(self.sidekick_id_bytes)
                .with_multicast_group(self.group)
        })
    }
}
