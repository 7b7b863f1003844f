package ipvs

// baseModules are the kernel modules the mode needs whatever the
// scheduler: IPVS itself (net/netfilter/ipvs/ip_vs_core.c, which needs
// conntrack for its NAT forwarding), the dummy interface kube-ipvs0, the
// types of kube-proxy's ipsets (hash:ip,port, hash:ip,port,ip,
// hash:ip,port,net, hash:ip, bitmap:port) and the x_tables tables,
// matches and targets of its nat and filter rules (set, mark, comment,
// addrtype, conntrack, physdev; MASQUERADE, REJECT).
var baseModules = []string{
	"ip_vs", "nf_conntrack", "nf_defrag_ipv4", "nf_nat", "dummy",
	"ip_set", "ip_set_hash_ipport", "ip_set_hash_ipportip", "ip_set_hash_ipportnet", "ip_set_hash_ip", "ip_set_bitmap_port",
	"x_tables", "ip_tables", "iptable_nat", "iptable_filter", "xt_set", "xt_mark", "xt_comment", "xt_MASQUERADE",
	"xt_addrtype", "xt_conntrack", "xt_physdev", "ipt_REJECT",
}

// KernelModules lists, in load order, the kernel modules the mode needs
// with scheduler (one of Schedulers): baseModules then ip_vs_<scheduler>.
// An empty scheduler lists every scheduler's module. A launcher (the UML
// guest) loads them with modprobe, which adds their dependencies; a module
// built into the kernel is not an error there.
func KernelModules(scheduler string) []string {
	out := append([]string(nil), baseModules...)
	if scheduler != "" {
		return append(out, "ip_vs_"+scheduler)
	}
	for _, s := range Schedulers {
		out = append(out, "ip_vs_"+s)
	}
	return out
}
