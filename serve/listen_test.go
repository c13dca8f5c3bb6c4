package serve

import "testing"

func TestCheckListen(t *testing.T) {
	for _, tc := range []struct {
		addr                 string
		token, tls, insecure bool
		ok                   bool
	}{
		{"127.0.0.1:7070", false, false, false, true},
		{"[::1]:7070", false, false, false, true},
		{"localhost:0", false, false, false, true},
		{"0.0.0.0:7070", false, false, false, false},
		{":7070", true, false, false, false},
		{"10.1.2.3:7070", false, true, false, false},
		{"10.1.2.3:7070", true, true, false, true},
		{"0.0.0.0:7070", false, false, true, true},
		{"nonsense", true, true, true, false},
	} {
		err := CheckListen(tc.addr, tc.token, tc.tls, tc.insecure)
		if (err == nil) != tc.ok {
			t.Errorf("CheckListen(%q, token %v, tls %v, insecure %v) = %v", tc.addr, tc.token, tc.tls, tc.insecure, err)
		}
	}
}
