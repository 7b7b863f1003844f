package userspace

import (
	"net/netip"
	"strings"
	"testing"
)

func TestRender(t *testing.T) {
	rs, err := Render([]Portal{
		{Name: "pb/svc-00000:p80", ClusterIP: netip.MustParseAddr("198.18.0.1"), Port: 80, Protocol: "TCP", ProxyPort: 40001},
		{Name: "pb/svc-00001:p53", ClusterIP: netip.MustParseAddr("198.18.0.2"), Port: 53, Protocol: "UDP", ProxyPort: 40002},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `*nat
:KUBE-PORTALS-CONTAINER - [0:0]
:KUBE-PORTALS-HOST - [0:0]
-A KUBE-PORTALS-CONTAINER -m comment --comment "pb/svc-00000:p80" -p tcp -m tcp -d 198.18.0.1/32 --dport 80 -j REDIRECT --to-ports 40001
-A KUBE-PORTALS-CONTAINER -m comment --comment "pb/svc-00001:p53" -p udp -m udp -d 198.18.0.2/32 --dport 53 -j REDIRECT --to-ports 40002
-A KUBE-PORTALS-HOST -m comment --comment "pb/svc-00000:p80" -p tcp -m tcp -d 198.18.0.1/32 --dport 80 -j REDIRECT --to-ports 40001
-A KUBE-PORTALS-HOST -m comment --comment "pb/svc-00001:p53" -p udp -m udp -d 198.18.0.2/32 --dport 53 -j REDIRECT --to-ports 40002
COMMIT
`
	if string(rs.Data) != want {
		t.Errorf("Render:\n%s\nwant:\n%s", rs.Data, want)
	}
	if rs.Rules != 4 {
		t.Errorf("Rules %d, want 4", rs.Rules)
	}
	if got := strings.Count(string(rs.Data), "\n-A "); got != rs.Rules {
		t.Errorf("%d -A lines, Rules %d", got, rs.Rules)
	}
}

func TestRenderErrors(t *testing.T) {
	ip := netip.MustParseAddr("198.18.0.1")
	for _, tc := range []struct {
		name string
		p    Portal
		want string
	}{
		{"sctp is not proxied", Portal{Name: "a", ClusterIP: ip, Port: 80, Protocol: "SCTP", ProxyPort: 1}, "protocol"},
		{"IPv6 ClusterIP", Portal{Name: "a", ClusterIP: netip.MustParseAddr("fd00::1"), Port: 80, Protocol: "TCP", ProxyPort: 1}, "IPv4"},
		{"listener not open", Portal{Name: "a", ClusterIP: ip, Port: 80, Protocol: "TCP"}, "proxy port"},
	} {
		if _, err := Render([]Portal{tc.p}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestRenderEmpty(t *testing.T) {
	rs, err := Render(nil)
	if err != nil || rs.Rules != 0 || !strings.HasSuffix(string(rs.Data), "- [0:0]\nCOMMIT\n") {
		t.Fatalf("empty: %q %v", rs.Data, err)
	}
}
