//! The root-only lab tests in one binary: coordinators in network namespaces whose links are
//! cut (`ip netns`, nftables), mount namespaces that cut a node off the filesystem store
//! (`nsenter`), and store files made immutable with `chattr +i`. They fail, not skip, without
//! root. The partition runs (seed 003's method on every backend) are here.

mod etcd_cluster;
mod filesystem_mount;
mod gossip_partitions;
mod partition_gossip;
mod reboot_record_first;
