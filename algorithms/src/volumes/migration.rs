//! In-tree volume plugins and the CSI drivers they migrated to: attach limits count an
//! in-tree volume under its CSI driver's name.

use k8s_openapi::api::core::v1 as core;

/// The driver and handle of a volume, for attach limits: a CSI source, or an in-tree
/// plugin with the identifier its CSI driver would use.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct VolumeHandle {
    /// CSI driver name, or in-tree plugin name (`kubernetes.io/aws-ebs`).
    pub driver: String,
    /// The volume's unique handle.
    pub handle: String,
}

/// In-tree plugin name and the CSI driver it is translated to.
pub const MIGRATED: &[(&str, &str)] = &[
    ("kubernetes.io/aws-ebs", "ebs.csi.aws.com"),
    ("kubernetes.io/gce-pd", "pd.csi.storage.gke.io"),
    ("kubernetes.io/azure-disk", "disk.csi.azure.com"),
    ("kubernetes.io/azure-file", "file.csi.azure.com"),
    ("kubernetes.io/cinder", "cinder.csi.openstack.org"),
    ("kubernetes.io/vsphere-volume", "csi.vsphere.vmware.com"),
    ("kubernetes.io/portworx-volume", "pxd.portworx.com"),
];

/// The CSI driver an in-tree plugin migrated to.
pub fn csi_driver_of(plugin: &str) -> Option<&'static str> {
    if !plugin.starts_with("kubernetes.io/") {
        return None;
    }
    MIGRATED.iter().find(|(p, _)| *p == plugin).map(|(_, d)| *d)
}

/// The in-tree plugin a CSI driver replaced.
pub fn plugin_of(driver: &str) -> Option<&'static str> {
    MIGRATED.iter().find(|(_, d)| *d == driver).map(|(p, _)| *p)
}

/// An EBS volume ID without its `aws://<zone>/` prefix.
fn ebs_id(id: &str) -> String {
    id.rsplit('/').next().unwrap_or(id).to_string()
}

fn in_tree(plugin: &str, handle: String) -> Option<VolumeHandle> {
    Some(VolumeHandle { driver: plugin.to_string(), handle })
}

/// The driver and handle of a PersistentVolume's source.
pub fn pv_handle(spec: &core::PersistentVolumeSpec) -> Option<VolumeHandle> {
    if let Some(csi) = &spec.csi {
        return Some(VolumeHandle { driver: csi.driver.clone(), handle: csi.volume_handle.clone() });
    }
    if let Some(s) = &spec.aws_elastic_block_store {
        return in_tree("kubernetes.io/aws-ebs", ebs_id(&s.volume_id));
    }
    if let Some(s) = &spec.gce_persistent_disk {
        return in_tree("kubernetes.io/gce-pd", s.pd_name.clone());
    }
    if let Some(s) = &spec.azure_disk {
        return in_tree("kubernetes.io/azure-disk", s.disk_uri.clone());
    }
    if let Some(s) = &spec.azure_file {
        return in_tree("kubernetes.io/azure-file", s.share_name.clone());
    }
    if let Some(s) = &spec.cinder {
        return in_tree("kubernetes.io/cinder", s.volume_id.clone());
    }
    if let Some(s) = &spec.vsphere_volume {
        return in_tree("kubernetes.io/vsphere-volume", s.volume_path.clone());
    }
    if let Some(s) = &spec.portworx_volume {
        return in_tree("kubernetes.io/portworx-volume", s.volume_id.clone());
    }
    None
}

/// The driver and handle of a pod's inline in-tree volume that has a CSI counterpart.
pub fn inline_handle(v: &core::Volume) -> Option<VolumeHandle> {
    if let Some(s) = &v.aws_elastic_block_store {
        return in_tree("kubernetes.io/aws-ebs", ebs_id(&s.volume_id));
    }
    if let Some(s) = &v.gce_persistent_disk {
        return in_tree("kubernetes.io/gce-pd", s.pd_name.clone());
    }
    if let Some(s) = &v.azure_disk {
        return in_tree("kubernetes.io/azure-disk", s.disk_uri.clone());
    }
    if let Some(s) = &v.cinder {
        return in_tree("kubernetes.io/cinder", s.volume_id.clone());
    }
    if let Some(s) = &v.vsphere_volume {
        return in_tree("kubernetes.io/vsphere-volume", s.volume_path.clone());
    }
    if let Some(s) = &v.portworx_volume {
        return in_tree("kubernetes.io/portworx-volume", s.volume_id.clone());
    }
    None
}
