package tui

import (
	"image/color"

	"charm.land/lipgloss/v2"
)

// styles are the TUI's colours for one terminal background. Colour is only
// a hint: every state is also said in words, so NO_COLOR (which the
// renderer honours by dropping colours) loses nothing.
type styles struct {
	dark bool

	header, status, statusLive, statusWarn lipgloss.Style
	you, author, assistant                 lipgloss.Style
	dim, notice, errorText, steer          lipgloss.Style
	toolHead, toolBody, diffAdd, diffDel   lipgloss.Style
	dialog, dialogTitle, key, selected     lipgloss.Style
	completion                             lipgloss.Style
}

func newStyles(dark bool) styles {
	ld := lipgloss.LightDark(dark)
	c := func(light, dark string) color.Color { return ld(lipgloss.Color(light), lipgloss.Color(dark)) }
	accent := c("#5A4FCF", "#9D8CFF")
	muted := c("#6B6B6B", "#8A8A8A")
	green := c("#2E7D32", "#7BC67E")
	red := c("#C62828", "#FF7A7A")
	yellow := c("#8D6E00", "#E6C15C")
	barBg := c("#E4E4EC", "#26263A")
	return styles{
		dark:        dark,
		header:      lipgloss.NewStyle().Bold(true).Background(barBg),
		status:      lipgloss.NewStyle().Foreground(muted),
		statusLive:  lipgloss.NewStyle().Foreground(green),
		statusWarn:  lipgloss.NewStyle().Foreground(yellow).Bold(true),
		you:         lipgloss.NewStyle().Foreground(accent).Bold(true),
		author:      lipgloss.NewStyle().Foreground(yellow).Bold(true),
		assistant:   lipgloss.NewStyle().Foreground(green).Bold(true),
		dim:         lipgloss.NewStyle().Foreground(muted),
		notice:      lipgloss.NewStyle().Foreground(muted).Italic(true),
		errorText:   lipgloss.NewStyle().Foreground(red).Bold(true),
		steer:       lipgloss.NewStyle().Foreground(yellow),
		toolHead:    lipgloss.NewStyle().Foreground(accent),
		toolBody:    lipgloss.NewStyle().Foreground(muted),
		diffAdd:     lipgloss.NewStyle().Foreground(green),
		diffDel:     lipgloss.NewStyle().Foreground(red),
		dialog:      lipgloss.NewStyle().Border(lipgloss.RoundedBorder()).BorderForeground(yellow).Padding(0, 1),
		dialogTitle: lipgloss.NewStyle().Foreground(yellow).Bold(true),
		key:         lipgloss.NewStyle().Foreground(accent).Bold(true),
		selected:    lipgloss.NewStyle().Reverse(true),
		completion:  lipgloss.NewStyle().Foreground(muted),
	}
}
