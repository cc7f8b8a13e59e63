//! Packrat multicast end to end in network namespaces (`SIDEKICK_LAB=1`, root): the
//! `packrat-multicast` scenario, small — a server streams to a multicast group, the ap carries the
//! group onto the client link, four receivers with the SDK subscribe through `multicast_group`,
//! and the real proxy repairs their losses from one shared cache (Packrat (CoNEXT '26) §6.1,
//! §7.2.3).

mod common;

use common::{run_trials, sidekick_bin_dir, skip};
use sidekick_lab::scenario::Scenario;
use std::path::PathBuf;

#[test]
fn packrat_multicast_repairs_from_one_cache_and_spares_the_server() {
    let test = "packrat_multicast_repairs_from_one_cache_and_spares_the_server";
    if skip(test) {
        return;
    }
    let bin_dir = sidekick_bin_dir(test);
    assert!(
        bin_dir.join("sidekick-multicast").exists(),
        "{test}: sidekick-multicast not built: cargo build -p sidekick-examples first"
    );
    // Four receivers (the shipped scenario runs 16): the receiver count is an application
    // argument, which `--set` cannot replace, so the file's text is.
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios/packrat-multicast.toml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{test}: {e}"));
    let text = text.replace(
        r#"client_args = ["--receivers", "16"]"#,
        r#"client_args = ["--receivers", "4"]"#,
    );
    let scn = Scenario::parse(
        &text,
        &["app.duration_s=8.0".into(), "app.timeout_s=60.0".into()],
    )
    .unwrap_or_else(|e| panic!("{test}: {e}"));
    assert_eq!(scn.app.client_args, ["--receivers", "4"], "{test}");
    let r = run_trials(test, &scn, bin_dir, 1);
    let metrics = |name: &str| {
        let v = r.variants.iter().find(|v| v.name == name).unwrap();
        assert!(
            v.skipped.is_none(),
            "{test}: {name} skipped: {:?}",
            v.skipped
        );
        let t = &v.trials[0];
        eprintln!("{test}: {name}: {:?}", t.metrics);
        assert!(t.error.is_none(), "{test}: {name}: {:?}", t.error);
        t.metrics.clone()
    };
    let e2e = metrics("e2e");
    let sk = metrics("sidekick");
    for m in [&e2e, &sk] {
        // Every receiver got the stream, and every loss was repaired by the end.
        assert_eq!(m["receivers_reporting"], 4.0, "{test}: {m:?}");
        assert_eq!(m["packets_missing"], 0.0, "{test}: {m:?}");
    }
    // End to end, the 10 % last hop makes every receiver NACK.
    assert!(e2e["server_nacks"] >= 40.0, "{test}: {e2e:?}");
    // With Packrat every receiver's session is up, the proxy keeps one group, repairs from it,
    // and far fewer NACKs reach the server.
    assert_eq!(sk["sidekick_active"], 4.0, "{test}: {sk:?}");
    assert_eq!(sk["proxy_multicast_groups"], 1.0, "{test}: {sk:?}");
    assert!(sk["proxy_retransmissions_total"] > 0.0, "{test}: {sk:?}");
    assert!(
        sk["server_nacks"] * 4.0 <= e2e["server_nacks"],
        "{test}: {} vs {} server NACKs",
        sk["server_nacks"],
        e2e["server_nacks"]
    );
}
