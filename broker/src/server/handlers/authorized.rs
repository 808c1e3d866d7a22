//! The operations a client may perform on a resource, for the answers that report them when
//! asked (`include_*_authorized_operations` of Metadata, DescribeCluster and DescribeGroups):
//! Weir has no authorizer, so, as Kafka without one, every operation Kafka's ACLs know for the
//! resource's type (Kafka's `AclEntry.supportedOperations`), as a bit field of
//! `AclOperation` codes. An answer not asked for them carries `i32::MIN` ("not given").

/// `AclOperation` codes.
const READ: u8 = 3;
const WRITE: u8 = 4;
const CREATE: u8 = 5;
const DELETE: u8 = 6;
const ALTER: u8 = 7;
const DESCRIBE: u8 = 8;
const CLUSTER_ACTION: u8 = 9;
const DESCRIBE_CONFIGS: u8 = 10;
const ALTER_CONFIGS: u8 = 11;
const IDEMPOTENT_WRITE: u8 = 12;

const fn bits(operations: &[u8]) -> i32 {
    let mut field = 0;
    let mut i = 0;
    while i < operations.len() {
        field |= 1 << operations[i];
        i += 1;
    }
    field
}

/// On a topic.
pub const TOPIC: i32 =
    bits(&[READ, WRITE, CREATE, DESCRIBE, DELETE, ALTER, DESCRIBE_CONFIGS, ALTER_CONFIGS]);
/// On a consumer group (DESCRIBE_CONFIGS and ALTER_CONFIGS since Kafka 3.9).
pub const GROUP: i32 = bits(&[READ, DESCRIBE, DELETE, DESCRIBE_CONFIGS, ALTER_CONFIGS]);
/// On the cluster.
pub const CLUSTER: i32 = bits(&[
    CREATE,
    CLUSTER_ACTION,
    DESCRIBE_CONFIGS,
    ALTER_CONFIGS,
    IDEMPOTENT_WRITE,
    ALTER,
    DESCRIBE,
]);

/// `operations` if they were asked for, else "not given".
pub fn if_asked(asked: bool, operations: i32) -> i32 {
    if asked { operations } else { i32::MIN }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_hold_kafkas_bits() {
        // What Kafka 3.9+ without an authorizer reports for a group: READ, DELETE, DESCRIBE,
        // DESCRIBE_CONFIGS and ALTER_CONFIGS.
        assert_eq!(GROUP, 0xD48);
        assert_eq!(TOPIC & (1 << READ), 1 << READ);
        assert_eq!(CLUSTER & (1 << READ), 0);
        assert_eq!(if_asked(false, TOPIC), i32::MIN);
    }
}
