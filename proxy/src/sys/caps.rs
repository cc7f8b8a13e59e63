//! Dropping Linux capabilities once the sockets are open (capset(2), prctl(2)).
//!
//! AF_PACKET needs CAP_NET_RAW when the socket is *created*; reading, sending and the ring need
//! nothing more. So the packet-processing process keeps no capability at all after setup, and
//! the bridge-mode supervisor, which restores the kernel bridge when a worker fails, keeps only
//! CAP_NET_ADMIN and CAP_NET_RAW (which its workers inherit through the ambient set).

use std::io;

/// CAP_NET_ADMIN (linux/capability.h).
pub const CAP_NET_ADMIN: u32 = 12;
/// CAP_NET_RAW.
pub const CAP_NET_RAW: u32 = 13;
const CAP_SETPCAP: u32 = 8;
const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;
const PR_CAPBSET_DROP: libc::c_int = 24;
const PR_CAP_AMBIENT: libc::c_int = 47;
const PR_CAP_AMBIENT_RAISE: libc::c_ulong = 2;
const PR_CAP_AMBIENT_CLEAR_ALL: libc::c_ulong = 4;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// The highest capability number the running kernel knows.
fn last_cap() -> u32 {
    std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(40)
}

fn capget() -> io::Result<[CapData; 2]> {
    let mut hdr = CapHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: version-3 capget takes a header and an array of two data structs, both valid and
    // writable for the call.
    let r = unsafe { libc::syscall(libc::SYS_capget, &raw mut hdr, data.as_mut_ptr()) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(data)
}

fn capset(data: &[CapData; 2]) -> io::Result<()> {
    let mut hdr = CapHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    // SAFETY: as capget; the kernel only reads `data`.
    let r = unsafe { libc::syscall(libc::SYS_capset, &raw mut hdr, data.as_ptr()) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn prctl(option: libc::c_int, a: libc::c_ulong, b: libc::c_ulong) -> io::Result<()> {
    // SAFETY: prctl with integer arguments only.
    let r = unsafe { libc::prctl(option, a, b, 0 as libc::c_ulong, 0 as libc::c_ulong) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A capability set as the two 32-bit words of the kernel's version-3 layout.
fn words(caps: &[u32]) -> [u32; 2] {
    let mut w = [0u32; 2];
    for &c in caps {
        if c < 64 {
            w[(c / 32) as usize] |= 1 << (c % 32);
        }
    }
    w
}

/// Reduce this process (every thread must be started *after*, they inherit the sets) to `keep`:
/// the bounding set (when CAP_SETPCAP allows; without it, as an unprivileged user with ambient
/// capabilities, nothing can be regained anyway), then the permitted, effective and inheritable
/// sets. `keep` stays in the ambient set, so that programs this process starts (the
/// supervisor's workers and `ip`) get exactly `keep` too; with `keep` empty the ambient set is
/// cleared. Fails if a capability in `keep` is not permitted.
pub fn restrict_to(keep: &[u32]) -> io::Result<()> {
    let now = capget()?;
    let kept = words(keep);
    let permitted = [now[0].permitted, now[1].permitted];
    if (0..2).any(|i| kept[i] & !permitted[i] != 0) {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "a capability to keep is not permitted",
        ));
    }
    let effective = [now[0].effective, now[1].effective];
    if effective[0] & (1 << CAP_SETPCAP) != 0 {
        for cap in 0..=last_cap() {
            if !keep.contains(&cap) {
                // EINVAL for numbers this kernel lacks; nothing else can fail with SETPCAP.
                let _ = prctl(PR_CAPBSET_DROP, cap.into(), 0);
            }
        }
    }
    // EINVAL: a kernel without ambient capabilities (< 4.3) has none to clear.
    if let Err(e) = prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0)
        && e.raw_os_error() != Some(libc::EINVAL)
    {
        return Err(e);
    }
    let data = [
        CapData {
            effective: kept[0],
            permitted: kept[0],
            inheritable: kept[0],
        },
        CapData {
            effective: kept[1],
            permitted: kept[1],
            inheritable: kept[1],
        },
    ];
    capset(&data)?;
    for &cap in keep {
        prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap.into())?;
    }
    Ok(())
}

/// The effective set of this process as a bit mask (what `/proc/self/status` shows as CapEff).
pub fn effective() -> io::Result<u64> {
    let d = capget()?;
    Ok(u64::from(d[0].effective) | (u64::from(d[1].effective) << 32))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capability_words() {
        assert_eq!(words(&[CAP_NET_RAW]), [1 << 13, 0]);
        assert_eq!(words(&[CAP_NET_ADMIN, 40]), [1 << 12, 1 << 8]);
        assert_eq!(words(&[]), [0, 0]);
        // The kernel's view of this process agrees with capget.
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let eff = status
            .lines()
            .find_map(|l| l.strip_prefix("CapEff:"))
            .map(|v| u64::from_str_radix(v.trim(), 16).unwrap())
            .unwrap();
        assert_eq!(effective().unwrap(), eff);
    }
}
