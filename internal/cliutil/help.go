package cliutil

import (
	"fmt"
	"strings"

	"github.com/blis-sim/blis/lib/trace"
	"github.com/urfave/cli/v2"
)

// setup gives every tool the same --help and --version.
func setup(app *cli.App) {
	app.HideHelpCommand = true // no "COMMANDS: help": the tools have no subcommands
	if app.Version == "" {
		app.Version = trace.Version
	}
	cli.HelpFlag = &cli.BoolFlag{Name: "help", Aliases: []string{"h"}, Usage: "show help", DisableDefaultText: true}
	cli.VersionFlag = &cli.BoolFlag{Name: "version", Usage: "print the version and exit", DisableDefaultText: true}
	cli.FlagStringer = flagString
	requireFlags(app)
}

var urfaveStringer = cli.FlagStringer

// flagString is urfave's line for a flag without its "(default: …)" when
// the usage already says what the default is ("(default 16)", "(default:
// from GPU memory)", "(0 = never)" for a 0), and without "(default:
// false)" on switches.
func flagString(f cli.Flag) string {
	s := urfaveStringer(f)
	df, ok := f.(cli.DocGenerationFlag)
	if !ok {
		return s
	}
	usage := df.GetUsage()
	own := strings.Contains(usage, "(default") ||
		df.GetDefaultText() == "0" && strings.Contains(usage, "0 = ") // "(0 = never)" says it

	if bf, isBool := f.(*cli.BoolFlag); isBool && !bf.Value && bf.DefaultText == "" {
		own = true
	}
	if !own {
		return s
	}
	if d := df.GetDefaultText(); d != "" {
		s = strings.TrimSuffix(s, fmt.Sprintf(" (default: %s)", d))
	}
	return s
}
