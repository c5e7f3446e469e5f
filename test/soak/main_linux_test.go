package soak

import (
	"testing"

	"github.com/openhcs/runhcs/test/e2e/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }
