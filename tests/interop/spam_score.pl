#!/usr/bin/env perl
# Scores messages with SpamAssassin's local rules, as `spamassassin -L -t` does, in one
# process: the rules are compiled once (about a second) and each message then takes tens of
# milliseconds, where `spamassassin` per message would take a second each.
#
# Usage: spam_score.pl FILE...
#
# Local rules only: no DNS blocklists, no URIBL, no Razor/Pyzor/DCC, no SPF or DKIM key
# lookups (local_tests_only, what `-L` sets); no Bayes and no auto-whitelist, so a score
# depends only on the message and the installed rules (Debian's `spamassassin` package:
# /usr/share/spamassassin and /etc/spamassassin). The user's own ~/.spamassassin is not read.
#
# For each file prints one JSON object per line:
#   {"item": FILE, "score": 1.2, "rules": {"RULE": 0.5, ...}, "version": "4.0.1"}
# Exits 0 when it could score every file, 2 on bad usage, 3 when SpamAssassin is missing.
use strict;
use warnings;

BEGIN {
    for my $module (qw(Mail::SpamAssassin JSON::PP)) {
        eval "require $module; 1" or do {
            print STDERR "spam_score.pl: missing Perl module $module: apt-get install spamassassin\n";
            exit 3;
        };
    }
}

my @files = @ARGV;
if (!@files || grep { /^-/ } @files) {
    print STDERR "usage: spam_score.pl FILE...\n";
    exit 2;
}

my $home = $ENV{TMPDIR} // '/tmp';
my $sa = Mail::SpamAssassin->new({
    local_tests_only => 1,
    dont_copy_prefs => 1,
    userprefs_filename => '/dev/null',
    userstate_dir => $home,
    post_config_text => "use_bayes 0\nbayes_auto_learn 0\nuse_auto_whitelist 0\n",
});
$sa->compile_now(0);
my $json = JSON::PP->new->canonical;

for my $file (@files) {
    open(my $fh, '<:raw', $file) or die "spam_score.pl: $file: $!\n";
    my $raw = do { local $/; <$fh> };
    close $fh;
    my $mail = $sa->parse($raw);
    my $status = $sa->check($mail);
    my %rules;
    for my $hit (split /,/, $status->get_names_of_tests_hit_with_scores) {
        my ($name, $score) = split /=/, $hit;
        $rules{$name} = 0 + $score if defined $name && length $name;
    }
    print $json->encode({ item => $file, score => 0 + $status->get_score, rules => \%rules,
        version => Mail::SpamAssassin::Version() }), "\n";
    $status->finish;
    $mail->finish;
}
