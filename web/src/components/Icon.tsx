// A few line icons drawn as SVG: no icon font, no emoji (not every system has
// a font for them), nothing a strict CSP would refuse.
const paths = {
  menu: 'M3 6h18M3 12h18M3 18h18',
  clip: 'M21 11.5l-8.6 8.6a5.5 5.5 0 01-7.8-7.8l8.6-8.6a3.7 3.7 0 015.2 5.2l-8.6 8.6a1.8 1.8 0 01-2.6-2.6l7.9-7.9',
  users: 'M16 20v-1.5a3.5 3.5 0 00-3.5-3.5h-5A3.5 3.5 0 004 18.5V20M10 11a3.5 3.5 0 100-7 3.5 3.5 0 000 7zM21 20v-1.5a3.5 3.5 0 00-2.5-3.3M16 4.2a3.5 3.5 0 010 6.6',
  stop: 'M6 6h12v12H6z',
  down: 'M12 5v14M6 13l6 6 6-6',
} as const;

export function Icon({ name }: { name: keyof typeof paths }) {
  return (
    <svg class="ico" viewBox="0 0 24 24" width="1em" height="1em" aria-hidden="true" fill="none" stroke="currentColor" stroke-width="2" stroke-linecap="round" stroke-linejoin="round">
      <path d={paths[name]} />
    </svg>
  );
}
