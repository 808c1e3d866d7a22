//! Unit tests of how a node hands its settings on to the parts it wires together.

use super::*;

#[test]
fn the_group_coordinator_takes_the_group_settings_of_the_broker() {
    let settings = "group_max_size = 2\noffsets_retention_minutes = 3\n\
                    offsets_retention_check_interval_ms = 4000\noffset_metadata_max_bytes = 5\n";
    let config = BrokerConfig::from_toml(settings).unwrap_or_else(|e| panic!("{e}"));
    let c = coordinator_config(&config);
    let taken = (
        c.group_members_max,
        c.offsets_retention_ms,
        c.offsets_retention_check_interval_ms,
        c.offset_metadata_bytes_max,
    );
    assert_eq!(taken, (2, 180_000, 4_000, 5));
    // Kafka's defaults: no member limit to speak of, a week's retention checked every 10 min.
    let c = coordinator_config(&BrokerConfig::default());
    let defaults = (
        c.group_members_max,
        c.offsets_retention_ms,
        c.offsets_retention_check_interval_ms,
        c.offset_metadata_bytes_max,
    );
    assert_eq!(defaults, (i32::MAX as usize, 7 * 24 * 3_600_000, 600_000, 4_096));
}
