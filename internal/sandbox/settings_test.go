package sandbox

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func ptr[T any](v T) *T { return &v }

func TestWidens(t *testing.T) {
	def := Settings{}
	cases := []struct {
		name     string
		old, new Settings
		keys     []string
	}{
		{"same defaults", def, Settings{Mode: ModeWorkspace}, nil},
		{"workspace to off", def, Settings{Mode: ModeOff}, []string{"sandbox"}},
		{"read-only to workspace", Settings{Mode: ModeReadOnly}, Settings{Mode: ModeWorkspace}, []string{"sandbox"}},
		{"read-only to off", Settings{Mode: ModeReadOnly}, Settings{Mode: ModeOff}, []string{"sandbox"}},
		{"workspace to read-only narrows", def, Settings{Mode: ModeReadOnly}, nil},
		{"off to workspace narrows", Settings{Mode: ModeOff}, def, nil},
		{"network on", def, Settings{Network: true}, []string{"sandbox_network"}},
		{"network off narrows", Settings{Network: true}, def, nil},
		{"a read path added", def, Settings{Read: []string{"/srv/data"}}, []string{"sandbox_read"}},
		{"a write path added", def, Settings{Write: []string{"/srv/cache"}}, []string{"sandbox_write"}},
		{"a read path inside a read path", Settings{Read: []string{"/srv"}}, Settings{Read: []string{"/srv/data"}}, nil},
		{"a read path inside a write path", Settings{Write: []string{"/srv"}}, Settings{Read: []string{"/srv/x"}}, nil},
		{"a read path made writable", Settings{Read: []string{"/srv"}}, Settings{Write: []string{"/srv"}}, []string{"sandbox_write"}},
		{"a sibling with a common prefix", Settings{Read: []string{"/srv"}}, Settings{Read: []string{"/srvx"}}, []string{"sandbox_read"}},
		{"dot-dot out of a listed path", Settings{Read: []string{"/srv"}}, Settings{Read: []string{"/srv/../etc/shadow"}}, []string{"sandbox_read"}},
		{"a path removed narrows", Settings{Write: []string{"/a", "/b"}}, Settings{Write: []string{"/a"}}, nil},
		{"everything at once", Settings{Mode: ModeReadOnly}, Settings{Mode: ModeOff, Network: true, Read: []string{"/r"}, Write: []string{"/w"}},
			[]string{"sandbox", "sandbox_network", "sandbox_read", "sandbox_write"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.keys, c.new.WideningKeys(c.old))
			assert.Equal(t, len(c.keys) > 0, c.new.Widens(c.old))
		})
	}
}

func TestPatchApplyKeepsWhatItDoesNotGive(t *testing.T) {
	base := Settings{Mode: ModeReadOnly, Network: true, Read: []string{"/r"}}
	got := Patch{Write: ptr([]string{"/w"})}.Apply(base)
	assert.Equal(t, Settings{Mode: ModeReadOnly, Network: true, Read: []string{"/r"}, Write: []string{"/w"}}, got)
	assert.True(t, Patch{}.Empty())
	assert.Error(t, Patch{Mode: ptr("")}.Validate())
	assert.Error(t, Patch{Mode: ptr("none")}.Validate())
	assert.Error(t, Patch{Read: ptr([]string{"relative/path"})}.Validate())
	assert.NoError(t, Patch{Mode: ptr(ModeOff), Read: ptr([]string{"/abs"})}.Validate())
}

func TestEnvDropsSecretsAndPointsCachesIntoTheWorkspaceCache(t *testing.T) {
	environ := []string{"PATH=/usr/bin", "TANDEM_TOKEN=s1", "OPENAI_API_KEY=s2", "ANTHROPIC_API_KEY=s3", "AZURE_OPENAI_API_KEY=s4", "MY_KEY=s5", "GOCACHE=/home/u/.cache/go", "TMPDIR=/tmp"}
	got := Env(environ, Spec{Tmp: "/d/tmp/s", Cache: "/d/cache/w"}, []string{"MY_KEY"})
	assert.ElementsMatch(t, []string{"PATH=/usr/bin", "TMPDIR=/d/tmp/s", "GOCACHE=/d/cache/w/go-build", "npm_config_cache=/d/cache/w/npm",
		"PIP_CACHE_DIR=/d/cache/w/pip", "XDG_CACHE_HOME=/d/cache/w/xdg"}, got)
	off := Env(environ, Spec{Settings: Settings{Mode: ModeOff}, Tmp: "/d/tmp/s"}, []string{"MY_KEY"})
	assert.ElementsMatch(t, []string{"PATH=/usr/bin", "GOCACHE=/home/u/.cache/go", "TMPDIR=/tmp"}, off)
}
